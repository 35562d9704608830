package httpapi

import "net/http"

// afterAccepted, if set, runs once a 202 claim answer is written. Only a
// test build sets it (killhook_on.go, build tag seckill_killhook): the
// crash tests kill the process at that instant.
var afterAccepted func(w http.ResponseWriter)
