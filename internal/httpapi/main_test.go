package httpapi

import (
	"testing"

	"go.uber.org/goleak"
)

// The Server starts no goroutines; the sale cache's loads run on the
// requests' own. Nothing may be left behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
