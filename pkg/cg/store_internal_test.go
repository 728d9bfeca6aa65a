package cg

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Only the server's failure to make a consumer's store is asked again:
// every other refusal of a create is returned at once.
func TestStoreCollisionIsTheOnlyCreateAskedAgain(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 500, ErrorCode: jetstream.JSErrCodeConsumerCreate, Description: "error creating store for consumer"}, true},
		{fmt.Errorf("consumer g-m1 on ORDERS: %w", &jetstream.APIError{Code: 500, ErrorCode: jetstream.JSErrCodeConsumerCreate, Description: "error creating store for consumer"}), true},
		{&jetstream.APIError{Code: 500, ErrorCode: jetstream.JSErrCodeConsumerCreate, Description: "consumer filter subject is not a valid subset of the interest subjects"}, false},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeMaximumConsumersLimit, Description: "maximum consumers limit reached"}, false},
		{jetstream.ErrConsumerExists, false},
		{nil, false},
	} {
		if got := storeCollision(c.err); got != c.want {
			t.Errorf("storeCollision(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
