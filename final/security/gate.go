package security

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkaworkbook/workbook/stage02-reactor/network"
	"github.com/kafkaworkbook/workbook/stage02-reactor/protocol"
)

// The API keys the gate serves itself.
const (
	keySaslHandshake    = 17
	keyApiVersions      = 18
	keySaslAuthenticate = 36
)

// gateState is where a connection is in Kafka's SaslServerAuthenticator.
type gateState int

const (
	// stateHandshake: a new connection may ask ApiVersions, then must
	// send SaslHandshake. Kafka answers one ApiVersions at a version it
	// serves and closes the connection at a second, but answers an
	// unsupported version with an error and lets the client ask again
	// (KIP-511). The gate passes ApiVersions to the broker and does not
	// know which versions its table serves, so it lets the client ask
	// until it sends SaslHandshake.
	stateHandshake gateState = iota
	// stateAuthenticate: a mechanism is chosen; its tokens follow, in
	// SaslAuthenticate requests (SaslHandshake v1) or as bare frames (v0).
	stateAuthenticate
	// stateComplete: authenticated; requests go to the broker.
	stateComplete
)

// session is a connection's SASL state, kept in its network.ConnState.
// A connection has one request in flight, so its requests take turns with
// it, and what one request's handler wrote before it answered is seen by
// the next one's: the answer goes to the connection's Processor through
// its response queue, which unmutes the connection, reads the next
// request and hands it to a handler through the RequestChannel.
type session struct {
	state     gateState
	mechanism string
	server    saslServer
	// raw: SaslHandshake v0 chose the mechanism, so its tokens come as
	// bare size-prefixed frames with no request header, and a failure
	// closes the connection without an answer (Kafka before KIP-152).
	raw bool
	// user is the authenticated user (Kafka's principal User:<user>);
	// during a re-authentication, the user it must stay.
	user string
	// expires is when the session ends (connections.max.reauth.ms after
	// the authentication); zero: never. lastReauth is when the last
	// re-authentication began: Kafka allows one a second.
	expires    time.Time
	lastReauth time.Time
	// reauthenticating is set while an authenticated connection
	// authenticates again; badMechanism is the failure to report when it
	// asked for another mechanism than the first.
	reauthenticating bool
	badMechanism     string
}

// Gate is a network.Handler in front of a broker's handler on a
// SASL_PLAINTEXT or SASL_SSL listener: Kafka's SaslServerAuthenticator.
type Gate struct {
	cfg    *SASLConfig
	next   network.Handler
	logger *slog.Logger
	now    func() time.Time
}

// NewSASLGate returns the handler of a SASL listener: until a connection
// has authenticated it serves only ApiVersions (passed to next, which
// answers with the broker's API table), SaslHandshake and
// SaslAuthenticate, and closes the connection on any other request
// ("Unexpected Kafka request of type ... during SASL handshake", as
// Kafka does); an authenticated connection's requests go to next.
//
// Wrong credentials are answered SASL_AUTHENTICATION_FAILED with Kafka's
// message, and the connection is closed. With connections.max.reauth.ms
// set, SaslAuthenticate tells the client its session lifetime; after it
// the client re-authenticates on the same connection with the same
// mechanism and user (KIP-368), or the connection is closed at its next
// request.
func NewSASLGate(cfg *SASLConfig, next network.Handler) *Gate {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	return &Gate{cfg: cfg, next: next, logger: logger.With("listener", cfg.Listener), now: time.Now}
}

// User reports the user a request's connection authenticated as, on a
// gated listener.
func User(r *network.Request) (user string, ok bool) {
	if r.Conn == nil {
		return "", false
	}
	s, _ := r.Conn.Load().(*session)
	if s == nil || s.user == "" || (s.state != stateComplete && !s.reauthenticating) {
		return "", false
	}
	return s.user, true
}

// Handle serves one request of the listener.
func (g *Gate) Handle(r *network.Request) {
	if r.Conn == nil { // a hand-built request has no connection to remember
		g.close(r, "request without a connection state")
		return
	}
	s, _ := r.Conn.Load().(*session)
	if s == nil {
		s = &session{}
		r.Conn.Store(s)
	}

	if s.state == stateComplete {
		g.authenticated(r, s)
		return
	}
	if s.state == stateAuthenticate && s.raw {
		g.rawToken(r, s)
		return
	}
	if len(r.Body) < 4 {
		g.close(r, "request too short for a header")
		return
	}
	key := int16(binary.BigEndian.Uint16(r.Body))
	switch {
	case key == keyApiVersions && s.state == stateHandshake:
		g.next.Handle(r)
	case key == keySaslHandshake && s.state == stateHandshake:
		g.handshake(r, s)
	case key == keySaslAuthenticate && s.state == stateAuthenticate:
		g.authenticate(r, s)
	case s.state == stateAuthenticate:
		g.close(r, "Unexpected Kafka request of type "+kafkaAPIName(key)+" during SASL authentication.")
	default:
		g.close(r, "Unexpected Kafka request of type "+kafkaAPIName(key)+" during SASL handshake.")
	}
}

// authenticated serves a request of an authenticated connection: to the
// broker, unless the session expired or the client re-authenticates.
func (g *Gate) authenticated(r *network.Request, s *session) {
	now := g.now()
	isHandshake := len(r.Body) >= 2 && int16(binary.BigEndian.Uint16(r.Body)) == keySaslHandshake
	// Kafka's KafkaChannel.maybeBeginServerReauthentication: only with a
	// session lifetime, and not twice within a second; otherwise the
	// handshake goes to the broker, which answers ILLEGAL_SASL_STATE.
	if isHandshake && !s.expires.IsZero() && now.Sub(s.lastReauth) >= time.Second {
		s.lastReauth = now
		s.reauthenticating = true
		g.handshake(r, s)
		return
	}
	if !s.expires.IsZero() && now.After(s.expires) {
		g.close(r, "session expired: connections.max.reauth.ms passed without re-authentication")
		return
	}
	g.next.Handle(r)
}

// versions are the gate's own APIs' versions, as Kafka 3.9 serves them.
func versions(key int16) (int16, int16, bool) {
	switch key {
	case keySaslHandshake:
		return 0, 1, true
	case keySaslAuthenticate:
		return 0, 2, true
	}
	return 0, 0, false
}

// handshake answers SaslHandshake: the enabled mechanisms, and NONE if the
// client's is one of them. v0 means the tokens follow as bare frames.
func (g *Gate) handshake(r *network.Request, s *session) {
	h, req, err := protocol.ParseRequest(r.Body, versions)
	if err != nil {
		g.close(r, err.Error())
		return
	}
	mech := req.(*kmsg.SASLHandshakeRequest).Mechanism
	resp := kmsg.NewPtrSASLHandshakeResponse()
	resp.SupportedMechanisms = slices.Clone(g.cfg.Mechanisms)
	if !slices.Contains(g.cfg.Mechanisms, mech) {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		g.logger.Info("failed authentication: unsupported SASL mechanism", "conn", r.ConnID, "mechanism", mech)
		g.respond(r, h, resp, true)
		return
	}
	if s.reauthenticating && mech != s.mechanism {
		s.badMechanism = fmt.Sprintf("SASL mechanism '%s' requested by client is not supported for re-authentication of mechanism '%s'", mech, s.mechanism)
	}
	s.mechanism, s.raw, s.state = mech, h.APIVersion == 0, stateAuthenticate
	s.server = g.newServer(mech)
	g.respond(r, h, resp, false)
}

func (g *Gate) newServer(mech string) saslServer {
	if mech == PLAIN {
		return &plainServer{users: g.cfg.PlainUsers}
	}
	return newScramServer(mech, g.cfg.Scram)
}

// authenticate answers SaslAuthenticate: the mechanism's next challenge,
// or SASL_AUTHENTICATION_FAILED and a closed connection.
func (g *Gate) authenticate(r *network.Request, s *session) {
	h, req, err := protocol.ParseRequest(r.Body, versions)
	if err != nil {
		g.close(r, err.Error())
		return
	}
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	challenge, done, err := g.evaluate(r, s, req.(*kmsg.SASLAuthenticateRequest).SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = new(g.failure(r, s, err))
		g.respond(r, h, resp, true)
		return
	}
	resp.SASLAuthBytes = challenge
	if done && h.APIVersion >= 1 {
		resp.SessionLifetimeMillis = g.cfg.MaxReauth[s.mechanism].Milliseconds()
	}
	g.respond(r, h, resp, false)
}

// rawToken serves a bare token after SaslHandshake v0.
func (g *Gate) rawToken(r *network.Request, s *session) {
	challenge, _, err := g.evaluate(r, s, r.Body)
	if err != nil {
		g.failure(r, s, err)
		r.Respond(network.Response{Close: true}) // v0 has no way to say why
		return
	}
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(challenge)))
	r.Respond(network.Response{Sends: []network.Send{network.BytesSend(append(frame, challenge...))}})
}

// evaluate runs one token through the mechanism and, when the exchange
// completes, marks the session authenticated and lifts the bound on the
// connection's requests (sasl.server.max.receive.size, set on the
// listener) to socket.request.max.bytes.
func (g *Gate) evaluate(r *network.Request, s *session, token []byte) ([]byte, bool, error) {
	if s.badMechanism != "" {
		return nil, false, &AuthError{s.badMechanism}
	}
	challenge, done, err := s.server.evaluate(token)
	if err != nil || !done {
		return challenge, done, err
	}
	user := s.server.authorizationID()
	if s.reauthenticating && user != s.user {
		return nil, false, &AuthError{fmt.Sprintf("Cannot change principals during re-authentication from User.%s: User.%s", s.user, user)}
	}
	g.logger.Debug("authenticated", "user", user, "mechanism", s.mechanism, "reauthentication", s.reauthenticating)
	s.user, s.state, s.server, s.reauthenticating = user, stateComplete, nil, false
	if r.Conn != nil {
		r.Conn.SetMaxFrameBytes(0)
	}
	s.expires = time.Time{}
	if d := g.cfg.MaxReauth[s.mechanism]; d > 0 {
		s.expires = g.now().Add(d)
	}
	return challenge, true, nil
}

// failure logs a failed authentication and returns the message for the
// client: an AuthError's own, else Kafka's generic one, which does not
// say whether the user exists.
func (g *Gate) failure(r *network.Request, s *session, err error) string {
	msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mechanism
	if s.reauthenticating {
		msg = "Authentication failed during re-authentication due to invalid credentials with SASL mechanism " + s.mechanism
	}
	if ae := (*AuthError)(nil); errors.As(err, &ae) {
		msg = ae.Msg
	}
	g.logger.Info("failed authentication", "conn", r.ConnID, "remote", r.RemoteAddr, "mechanism", s.mechanism, "err", err)
	return msg
}

func (g *Gate) respond(r *network.Request, h protocol.Header, resp kmsg.Response, closeAfter bool) {
	resp.SetVersion(h.APIVersion)
	r.Respond(network.Response{Sends: []network.Send{network.BytesSend(protocol.AppendResponse(nil, h, resp))}, Close: closeAfter})
}

func (g *Gate) close(r *network.Request, why string) {
	g.logger.Info("closing connection", "conn", r.ConnID, "remote", r.RemoteAddr, "reason", why)
	r.Respond(network.Response{Close: true})
}

// kafkaAPIName is an API's name as Kafka's ApiKeys enum spells it
// (PRODUCE, SASL_HANDSHAKE), for Kafka's log messages.
func kafkaAPIName(key int16) string {
	name := kmsg.NameForKey(key)
	if name == "" {
		return fmt.Sprintf("%d", key)
	}
	var b strings.Builder
	rs := []rune(name)
	for i, c := range rs {
		if i > 0 && unicode.IsUpper(c) && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}
