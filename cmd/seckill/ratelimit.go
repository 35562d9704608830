package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seckill-dev/seckill"
)

var errLimitSyntax = errors.New(`want RATE/PERIOD, e.g. "20/1m", "5/1s", or "off"`)

// parseLimit reads a rate limit as configured (SECKILL_RATE_LIMIT_IP,
// SECKILL_RATE_LIMIT_USER): "RATE/PERIOD" ("20/1m", "100/1h30m", "20/m"), or
// "off" (off = true, the zero Limit). RateLimit.String prints it back.
func parseLimit(s string) (l seckill.RateLimit, off bool, err error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return seckill.RateLimit{}, true, nil
	}
	rate, per, ok := strings.Cut(s, "/")
	if !ok || rate == "" || len(rate) > 7 || per == "" {
		return seckill.RateLimit{}, false, fmt.Errorf("rate limit %q: %w", s, errLimitSyntax)
	}
	for i := 0; i < len(rate); i++ {
		if rate[i] < '0' || rate[i] > '9' {
			return seckill.RateLimit{}, false, fmt.Errorf("rate limit %q: %w", s, errLimitSyntax)
		}
	}
	n, _ := strconv.Atoi(rate) // at most 7 digits: cannot fail
	if strings.TrimLeft(per, "abcdefghijklmnopqrstuvwxyzµ") == "" {
		per = "1" + per // a bare unit: "20/m" is "20/1m"
	}
	d, err := time.ParseDuration(per)
	if err != nil || per[0] == '+' || per[0] == '-' {
		return seckill.RateLimit{}, false, fmt.Errorf("rate limit %q: %w", s, errLimitSyntax)
	}
	l = seckill.RateLimit{Rate: n, Period: d}
	if err := l.Validate(); err != nil {
		return seckill.RateLimit{}, false, fmt.Errorf("rate limit %q: %w", s, err)
	}
	return l, false, nil
}
