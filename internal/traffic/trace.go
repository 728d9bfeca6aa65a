package traffic

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// TraceparentHeader is the W3C trace context header a traced message
// carries, as an OpenTelemetry consumer (pkg/cg/plugin/cgotel) reads it.
const TraceparentHeader = "traceparent"

// TracestateHeader carries vendor trace state beside it.
const TracestateHeader = "tracestate"

// NewTraceparent makes a W3C traceparent with a fresh random trace id and
// parent id, sampled, and returns it with its trace id: what a publisher
// without a tracer stamps so that a trace starts at its messages.
func NewTraceparent() (header, traceID string) {
	var b [24]byte
	for {
		_, _ = rand.Read(b[:])
		if !allZero(b[:16]) && !allZero(b[16:]) { // all-zero ids are invalid
			break
		}
	}
	traceID = hex.EncodeToString(b[:16])
	return "00-" + traceID + "-" + hex.EncodeToString(b[16:]) + "-01", traceID
}

// ParseTraceparent checks a traceparent (version 00 as the W3C
// recommendation writes it: 00-<32 hex trace id>-<16 hex parent id>-<2 hex
// flags>) and returns its trace id.
func ParseTraceparent(s string) (traceID string, err error) {
	parts := strings.Split(s, "-")
	if len(parts) != 4 || parts[0] != "00" || !isHex(parts[1], 32) || !isHex(parts[2], 16) || !isHex(parts[3], 2) {
		return "", fmt.Errorf("traceparent %q is not 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>", s)
	}
	if strings.Trim(parts[1], "0") == "" || strings.Trim(parts[2], "0") == "" {
		return "", fmt.Errorf("traceparent %q has an all-zero id", s)
	}
	return parts[1], nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
