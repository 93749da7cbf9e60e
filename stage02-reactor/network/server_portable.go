//go:build !linux || portable

package network

// NewServer returns the portable server (NewPortableServer): this is not
// Linux, or the build tag portable is set.
func NewServer(cfg Config, h Handler) (*Server, error) { return NewPortableServer(cfg, h) }
