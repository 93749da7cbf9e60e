//go:build linux && !portable

package network

// NewServer returns the reactor (NewReactorServer): this is Linux and the
// build tag portable is not set.
func NewServer(cfg Config, h Handler) (*Server, error) { return NewReactorServer(cfg, h) }
