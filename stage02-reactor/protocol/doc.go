// Package protocol frames Kafka requests and responses around the message
// bodies that franz-go's kmsg encodes and decodes.
//
// Every request on the wire is
//
//	size int32 | api_key int16 | api_version int16 | correlation_id int32 |
//	client_id nullable string (int16 length) | [tagged fields, v2 header] | body
//
// and every response
//
//	size int32 | correlation_id int32 | [tagged fields, v1 header] | body
//
// The header version follows the body's: a "flexible" version of an API (one
// that uses compact encodings and tagged fields, KIP-482) is framed with
// request header v2 and response header v1, except that ApiVersions
// responses always use header v0, so that a client that sent a version the
// broker does not know can still read the answer.
//
// The network layer (package network) has already removed the size prefix
// when a request arrives; ParseRequest reads the rest. Fetch responses are
// special: their record batches are regions of log files, so
// FetchResponseSends encodes one as a list of network sends, bytes
// interleaved with file regions, instead of one buffer.
package protocol
