package faultproxy

import (
	"math/rand/v2"
	"time"
)

// stallFor is how long a stall of [Faults] lasts.
const stallFor = 20 * time.Millisecond

// Faults returns the faults a linearizability check injects through
// proxies (storetest.LinearizabilityConfig): each picks one of the
// proxies at random and drops its next reply (cutting that connection),
// cuts all its connections, sets its latency to a few milliseconds or back
// to none, or stalls it for 20ms. heal ends every fault of every proxy.
func Faults(proxies ...*Proxy) (faults []func(), heal func()) {
	pick := func() *Proxy { return proxies[rand.IntN(len(proxies))] }
	faults = []func(){
		func() { pick().CutNextReply(1) },
		func() { pick().CutAll() },
		func() { pick().SetLatency(time.Duration(rand.IntN(5)) * time.Millisecond) },
		func() { pick().SetLatency(0) },
		func() {
			p := pick()
			p.Stall()
			time.AfterFunc(stallFor, p.Resume)
		},
	}
	heal = func() {
		for _, p := range proxies {
			p.SetLatency(0)
			p.Resume()
		}
	}
	return faults, heal
}
