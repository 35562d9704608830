package httpapi

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seckill-dev/seckill"
)

// Reservation outcomes as counted in seckill_reservations_total. Every
// answer of the reservation route falls in exactly one.
type outcome int

const (
	outReserved outcome = iota
	outReplayed
	outSoldOut
	outLimitExceeded
	outNotStarted
	outEnded
	outKeyReused
	outSaleNotFound
	outInvalid
	outTooLarge
	outUnauthorized
	outRateLimited
	outOverloaded
	outUnavailable
	outTryLater
	outAdmission // the sale is a lottery or a queue: no first come claim
	outCanceled  // the client hung up before the answer
	outError
	numOutcomes
)

var outcomeLabels = [numOutcomes]string{
	outReserved:      "reserved",
	outReplayed:      "replayed",
	outSoldOut:       seckill.ESOLDOUT,
	outLimitExceeded: seckill.EPURCHASELIMIT,
	outNotStarted:    seckill.ENOTSTARTED,
	outEnded:         seckill.EENDED,
	outKeyReused:     seckill.EKEYREUSED,
	outSaleNotFound:  seckill.ESALENOTFOUND,
	outInvalid:       seckill.EINVALID,
	outTooLarge:      seckill.ETOOLARGE,
	outUnauthorized:  seckill.EUNAUTHORIZED,
	outRateLimited:   seckill.ERATELIMITED,
	outOverloaded:    seckill.EOVERLOADED,
	outUnavailable:   seckill.EUNAVAILABLE,
	outTryLater:      seckill.ETRYLATER,
	outAdmission:     seckill.EADMISSION,
	outCanceled:      "canceled",
	outError:         "error",
}

// outcomeOfCode classifies an error answer of the reservation route.
func outcomeOfCode(code string) outcome {
	switch code {
	case seckill.ESOLDOUT:
		return outSoldOut
	case seckill.EPURCHASELIMIT:
		return outLimitExceeded
	case seckill.EADMISSION:
		return outAdmission
	case seckill.ENOTSTARTED:
		return outNotStarted
	case seckill.EENDED:
		return outEnded
	case seckill.EKEYREUSED:
		return outKeyReused
	case seckill.ESALENOTFOUND:
		return outSaleNotFound
	case seckill.EINVALID:
		return outInvalid
	case seckill.ETOOLARGE:
		return outTooLarge
	case seckill.EUNAUTHORIZED:
		return outUnauthorized
	case seckill.ERATELIMITED:
		return outRateLimited
	case seckill.EOVERLOADED:
		return outOverloaded
	case seckill.EUNAVAILABLE:
		return outUnavailable
	case seckill.ETRYLATER:
		return outTryLater
	}
	return outError
}

type metrics struct {
	reservations    [numOutcomes]prometheus.Counter
	reserveDuration prometheus.Histogram
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	degraded        *prometheus.CounterVec
}

// Reasons of seckill_http_degraded_total.
const (
	degradedUnavailable = "unavailable" // 503: a backend is down or slow
	degradedStale       = "stale"       // 200 from the last good copy
)

// latencyBuckets cover 100µs to 1s, finer where a healthy API answers.
var latencyBuckets = []float64{
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	reservations := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "seckill_reservations_total",
		Help: "Answers of the reservation route, by outcome.",
	}, []string{"outcome"})
	m := &metrics{
		reserveDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "seckill_reserve_duration_seconds",
			Help:    "Time to answer a reservation request, from the handler's start to its answer.",
			Buckets: latencyBuckets,
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_requests_total",
			Help: "HTTP requests by route pattern and status (499: the client hung up first).",
		}, []string{"route", "status"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "seckill_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern.",
			Buckets: latencyBuckets,
		}, []string{"route"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "seckill_http_degraded_total",
			Help: "Answers degraded by a backend outage, by route pattern and reason (unavailable: 503; stale: served from the last good copy).",
		}, []string{"route", "reason"}),
	}
	// Children made up front: the hot path only increments, and every
	// outcome is exported from the start (rate() needs the zero).
	for o := range numOutcomes {
		m.reservations[o] = reservations.WithLabelValues(outcomeLabels[o])
	}
	for _, c := range []prometheus.Collector{reservations, m.reserveDuration, m.httpRequests, m.httpDuration, m.degraded} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// degrade counts one degraded answer.
func (m *metrics) degrade(route, reason string) {
	m.degraded.WithLabelValues(route, reason).Inc()
}

// CountDegraded counts an answer degraded by a backend outage that a
// handler beside the API gave (the pages of internal/web), in
// seckill_http_degraded_total with the API's own: reason is
// "unavailable" (a 503) or "stale" (the last good copy).
func (s *Server) CountDegraded(route, reason string) { s.metrics.degrade(route, reason) }

func (m *metrics) reservation(o outcome, took time.Duration) {
	m.reservations[o].Inc()
	m.reserveDuration.Observe(took.Seconds())
}

// routeMetrics are one route's children, looked up once per status and
// then kept, so a request costs no label hashing.
type routeMetrics struct {
	requests *prometheus.CounterVec // curried with the route
	duration prometheus.Observer
	byStatus [600]atomic.Pointer[prometheus.Counter]
}

func (m *metrics) route(route string) *routeMetrics {
	return &routeMetrics{
		requests: m.httpRequests.MustCurryWith(prometheus.Labels{"route": route}),
		duration: m.httpDuration.WithLabelValues(route),
	}
}

// observe counts an answer of status, and its latency since start unless
// the route observes its own.
func (rm *routeMetrics) observe(status int, start time.Time) {
	if rm.duration != nil {
		rm.duration.Observe(time.Since(start).Seconds())
	}
	if status < 100 || status >= len(rm.byStatus) {
		rm.requests.WithLabelValues(strconv.Itoa(status)).Inc()
		return
	}
	p := rm.byStatus[status].Load()
	if p == nil {
		c := rm.requests.WithLabelValues(strconv.Itoa(status))
		p = &c
		rm.byStatus[status].Store(p) // a racing Store holds the same child
	}
	(*p).Inc()
}
