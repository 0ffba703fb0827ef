package redisstore

import "github.com/redis/go-redis/v9"

// DecodeClaimReply exposes decodeClaimReply to the black-box fuzz test.
var DecodeClaimReply = decodeClaimReply

// DecodeFencedReply exposes decodeFencedReply to the black-box fuzz test.
var DecodeFencedReply = decodeFencedReply

// ClaimScript exposes the claim script, to resend a claim with a known
// token.
func ClaimScript() *redis.Script { return claimScript }
