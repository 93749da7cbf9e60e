package security

import (
	"bytes"
	"crypto/subtle"
	"fmt"
)

// The mechanism names of sasl.enabled.mechanisms.
const (
	PLAIN       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	GSSAPI      = "GSSAPI" // Kafka's default; Kerberos is not built here
)

// A saslServer is the server side of one SASL exchange (javax.security.sasl's
// SaslServer): it evaluates the client's tokens one by one.
type saslServer interface {
	// evaluate takes the client's next token and returns the server's
	// answer and whether the exchange is complete. An error fails the
	// authentication; an *AuthError's message is sent to the client.
	evaluate(token []byte) (challenge []byte, done bool, err error)
	// authorizationID is the authenticated user, once done.
	authorizationID() string
}

// An AuthError is an authentication failure whose message is safe to send
// to the client (Kafka's SaslAuthenticationException). Other errors from a
// mechanism are answered with Kafka's generic message, which says nothing
// about whether the user exists.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

// plainServer is SASL/PLAIN (RFC 4616) against the users of the JAAS
// config's user_<name>="<password>" options, as Kafka's PlainSaslServer and
// PlainServerCallbackHandler check them.
type plainServer struct {
	users map[string]string
	user  string
}

func (s *plainServer) evaluate(token []byte) ([]byte, bool, error) {
	// message = [authzid] NUL authcid NUL passwd; Kafka splits at most
	// four times and wants exactly three parts.
	// exercise 07.1: check a PLAIN password as Kafka does, without saying which users exist
	// hint: Kafka answers one message for a wrong user and a wrong password alike, and compares in constant time; then the authorization id, if any, must be the user
	// tests: TestPlainServerChecksKafkasWay
	parts := bytes.SplitN(token, []byte{0}, 4)
	if len(parts) != 3 {
		return nil, false, &AuthError{fmt.Sprintf("Invalid SASL/PLAIN response: expected 3 tokens, got %d", len(parts))}
	}
	authzid, user, password := string(parts[0]), string(parts[1]), parts[2]
	if user == "" {
		return nil, false, &AuthError{"Authentication failed: username not specified"}
	}
	if len(password) == 0 {
		return nil, false, &AuthError{"Authentication failed: password not specified"}
	}
	want, ok := s.users[user]
	// Compare even for an unknown user, so that the time taken does not
	// say which users exist.
	equal := subtle.ConstantTimeCompare([]byte(want), password) == 1
	if !ok || !equal {
		return nil, false, &AuthError{"Authentication failed: Invalid username or password"}
	}
	if authzid != "" && authzid != user {
		return nil, false, &AuthError{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	s.user = user
	return []byte{}, true, nil
	// end exercise
}

func (s *plainServer) authorizationID() string { return s.user }
