package cg

import (
	"context"
	"errors"
)

// JoinElastic starts an instance of member in an elastic group.
func (c *Client) JoinElastic(ctx context.Context, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	return nil, errors.New("not yet")
}
