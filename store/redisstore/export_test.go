package redisstore

// DecodeClaimReply exposes decodeClaimReply to the black-box fuzz test.
var DecodeClaimReply = decodeClaimReply

// DecodeFencedReply exposes decodeFencedReply to the black-box fuzz test.
var DecodeFencedReply = decodeFencedReply
