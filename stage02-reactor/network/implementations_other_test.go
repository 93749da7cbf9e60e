//go:build !linux

package network

var implementations = []implementation{
	{"portable", NewPortableServer},
}
