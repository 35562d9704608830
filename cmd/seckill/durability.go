package main

import (
	"crypto/hmac"
	"crypto/sha256"

	"github.com/prometheus/client_golang/prometheus"
)

// durabilityMetrics count what the engine did about Redis losing writes
// it had acknowledged.
type durabilityMetrics struct {
	lostClaims prometheus.Counter
}

func newDurabilityMetrics(reg prometheus.Registerer) *durabilityMetrics {
	m := &durabilityMetrics{
		lostClaims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "seckill_lost_claims_total",
			Help: "Claimed reservations the stock store forgot and the database never got, recorded failed (lost_in_stock_store): alert on any increase.",
		}),
	}
	reg.MustRegister(m.lostClaims)
	return m
}

// claimKey derives the key that signs reservation ids from the JWT
// secret, which every node of a deployment already shares; a separate
// derivation, so that no id tag can ever serve as a token signature.
func claimKey(jwtSecret string) []byte {
	m := hmac.New(sha256.New, []byte(jwtSecret))
	m.Write([]byte("seckill reservation ids v1"))
	return m.Sum(nil)
}
