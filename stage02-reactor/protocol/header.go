package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors from ParseRequest; test for them with errors.Is.
var (
	ErrMalformed          = errors.New("protocol: malformed request")
	ErrUnknownAPIKey      = errors.New("protocol: unknown api key")
	ErrUnsupportedVersion = errors.New("protocol: unsupported api version")
)

// ApiVersionsKey is the one API whose unsupported versions still get an
// answer (an UNSUPPORTED_VERSION error in a v0 response listing what the
// broker supports); other unsupported requests close the connection.
const ApiVersionsKey = 18

// minHeaderSize is the smallest request header: api_key, api_version,
// correlation_id and the client id's int16 length.
const minHeaderSize = 2 + 2 + 4 + 2

// Header is a request header.
type Header struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      *string // nullable
	Flexible      bool    // header v2 (tagged fields); the response uses header v1
}

// Versions reports the versions of an API key that the broker implements.
type Versions func(key int16) (min, max int16, ok bool)

// build 02.E: the request header: parse it (v1 and v2, tagged fields), and frame a response
// tests: TestParseRequestHeaderV1AndV2, TestParseRequestNeedsAWholeHeader, TestParseRequestNullClientID, TestParseRequestRefusals, TestAppendResponseHeaders

// ParseRequest reads a request (the bytes after its size prefix): the
// header, then the body with kmsg at the header's version. versions decides
// which keys and versions are accepted. On ErrUnknownAPIKey or
// ErrUnsupportedVersion the returned header is filled in, so the caller can
// answer or log it.
func ParseRequest(b []byte, versions Versions) (Header, kmsg.Request, error) {
	var h Header
	if len(b) < minHeaderSize {
		return h, nil, fmt.Errorf("%w: %d bytes, a header needs at least %d", ErrMalformed, len(b), minHeaderSize)
	}
	h.APIKey = int16(binary.BigEndian.Uint16(b))
	h.APIVersion = int16(binary.BigEndian.Uint16(b[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(b[4:]))
	r := reader{b: b[8:], ok: true}
	h.ClientID = r.nullableString()
	if !r.ok {
		return h, nil, fmt.Errorf("%w: client id", ErrMalformed)
	}

	req := kmsg.RequestForKey(h.APIKey)
	min, max, ok := versions(h.APIKey)
	if req == nil || !ok {
		return h, nil, fmt.Errorf("%w: %d", ErrUnknownAPIKey, h.APIKey)
	}
	if h.APIVersion < min || h.APIVersion > max {
		return h, nil, fmt.Errorf("%w: %s v%d (supported: v%d-v%d)", ErrUnsupportedVersion, kmsg.NameForKey(h.APIKey), h.APIVersion, min, max)
	}
	req.SetVersion(h.APIVersion)
	h.Flexible = req.IsFlexible()
	if h.Flexible {
		r.skipTags()
		if !r.ok {
			return h, nil, fmt.Errorf("%w: header tagged fields", ErrMalformed)
		}
	}
	if err := req.ReadFrom(r.b); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d body: %v", ErrMalformed, kmsg.NameForKey(h.APIKey), h.APIVersion, err)
	}
	return h, req, nil
}

// AppendResponse appends a whole response to dst: size prefix, response
// header and body. The body is encoded at resp's version.
func AppendResponse(dst []byte, h Header, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0) // size, filled in below
	dst = AppendResponseHeader(dst, h)
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendResponseHeader appends the response header for a request header:
// the correlation id, and an empty tag section for flexible versions
// (except ApiVersions, whose responses always use header v0).
func AppendResponseHeader(dst []byte, h Header) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.CorrelationID))
	if h.Flexible && h.APIKey != ApiVersionsKey {
		dst = append(dst, 0) // no tagged fields
	}
	return dst
}

// reader reads header fields with a sticky error.
type reader struct {
	b  []byte
	ok bool
}

func (r *reader) nullableString() *string {
	if len(r.b) < 2 {
		r.ok = false
		return nil
	}
	n := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	if n < 0 {
		return nil
	}
	if int(n) > len(r.b) {
		r.ok = false
		return nil
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return &s
}

// skipTags skips a tagged-field section: a count, then (tag, size, bytes).
func (r *reader) skipTags() {
	n := r.uvarint()
	for i := uint64(0); i < n && r.ok; i++ {
		r.uvarint() // tag
		size := r.uvarint()
		if !r.ok || size > uint64(len(r.b)) {
			r.ok = false
			return
		}
		r.b = r.b[size:]
	}
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.ok = false
		return 0
	}
	r.b = r.b[n:]
	return v
}

// end build
