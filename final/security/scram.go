package security

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"math/big"
	"strconv"
	"strings"
)

// build 07.A: SCRAM-SHA-256/512: stored credentials and the server's side of RFC 5802, as Kafka's ScramSaslServer
// tests: TestScramServerFollowsRFC7677sExample, TestScramServerAuthenticatesFranzGosClient, TestScramServerAcceptsOnlyItsOwnNonce, TestScramServerRefusesFewIterationsAndAnotherAuthzid, TestScramCredentialReadsBackAsKafkaWritesIt

// SCRAM's iteration bounds, as Kafka's ScramMechanism has them for both
// SHA-256 and SHA-512: fewer than 4096 iterations are refused (RFC 7677
// asks for at least 4096), kafka-configs.sh refuses more than 16384.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// A ScramCredential is what a broker keeps of a SCRAM user's password (RFC
// 5802 §3): the salt, the iteration count, StoredKey = H(ClientKey) and
// ServerKey. The password itself is not kept and cannot be recovered.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int
}

// scramHash is the hash of a SCRAM mechanism, or nil.
func scramHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	return nil
}

// NewScramCredential derives a credential from a password as
// kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]'
// does (Kafka's ScramFormatter.generateCredential): a fresh random salt,
// SaltedPassword = PBKDF2(password, salt, iterations), ClientKey =
// HMAC(SaltedPassword, "Client Key"), StoredKey = H(ClientKey), ServerKey
// = HMAC(SaltedPassword, "Server Key").
func NewScramCredential(mechanism, password string, iterations int) (ScramCredential, error) {
	h := scramHash(mechanism)
	if h == nil {
		return ScramCredential{}, fmt.Errorf("security: %q is not a SCRAM mechanism", mechanism)
	}
	if iterations < ScramMinIterations || iterations > ScramMaxIterations {
		return ScramCredential{}, fmt.Errorf("security: %s iterations %d outside [%d, %d]", mechanism, iterations, ScramMinIterations, ScramMaxIterations)
	}
	// Kafka's salt is the bytes of a random base-36 string (130 bits).
	return scramCredentialWithSalt(mechanism, password, []byte(randomString()), iterations)
}

func scramCredentialWithSalt(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	h := scramHash(mechanism)
	salted, err := pbkdf2.Key(h, password, salt, iterations, h().Size())
	if err != nil {
		return ScramCredential{}, fmt.Errorf("security: %s: %w", mechanism, err)
	}
	clientKey := hmacOf(h, salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       salt,
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacOf(h, salted, "Server Key"),
		Iterations: iterations,
	}, nil
}

// String is the credential as ZooKeeper's /config/users/<user> holds it
// under the mechanism's name (Kafka's ScramCredentialUtils):
// salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>.
func (c ScramCredential) String() string {
	b64 := base64.StdEncoding.EncodeToString
	return "salt=" + b64(c.Salt) + ",stored_key=" + b64(c.StoredKey) + ",server_key=" + b64(c.ServerKey) +
		",iterations=" + strconv.Itoa(c.Iterations)
}

// ParseScramCredential reads a credential written by String (or by
// kafka-configs.sh).
func ParseScramCredential(s string) (ScramCredential, error) {
	fields := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return ScramCredential{}, errors.New("security: SCRAM credential not valid")
		}
		fields[k] = v
	}
	var c ScramCredential
	var errs [4]error
	c.Salt, errs[0] = base64.StdEncoding.DecodeString(fields["salt"])
	c.StoredKey, errs[1] = base64.StdEncoding.DecodeString(fields["stored_key"])
	c.ServerKey, errs[2] = base64.StdEncoding.DecodeString(fields["server_key"])
	c.Iterations, errs[3] = strconv.Atoi(fields["iterations"])
	if len(fields) != 4 || errors.Join(errs[:]...) != nil || len(c.Salt) == 0 {
		// The message does not repeat the credential: it is a secret.
		return ScramCredential{}, errors.New("security: SCRAM credential not valid: want salt, stored_key, server_key, iterations")
	}
	return c, nil
}

func hmacOf(h func() hash.Hash, key []byte, msg string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// randomString is Kafka's ScramFormatter.secureRandomString: 130 random
// bits in base 36, for nonces and salts.
func randomString() string {
	var b [17]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	b[0] &= 0x03 // 130 bits
	return new(big.Int).SetBytes(b[:]).Text(36)
}

// ScramCredentials looks up a user's credential for a mechanism.
type ScramCredentials interface {
	ScramCredential(mechanism, user string) (ScramCredential, bool)
}

// scramServer is the server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC
// 5802, RFC 7677), as Kafka's ScramSaslServer runs it: client-first,
// server-first, client-final, server-final.
type scramServer struct {
	mechanism string
	hash      func() hash.Hash
	creds     ScramCredentials

	// Kept from the first message for the second.
	cred            ScramCredential
	gs2Header       string // "n,," or "n,a=<authzid>,"
	clientFirstBare string
	serverFirst     string
	nonce           string // client nonce + server nonce
	user            string
	serverNonce     func() string // randomString; a test's fixed nonce
	done            bool
}

func newScramServer(mechanism string, creds ScramCredentials) *scramServer {
	return &scramServer{mechanism: mechanism, hash: scramHash(mechanism), creds: creds, serverNonce: randomString}
}

func (s *scramServer) authorizationID() string { return s.user }

func (s *scramServer) evaluate(token []byte) ([]byte, bool, error) {
	if s.serverFirst == "" {
		return s.clientFirst(string(token))
	}
	if s.done {
		return nil, false, errors.New("unexpected challenge after SCRAM completed")
	}
	return s.clientFinal(string(token))
}

// clientFirst reads "n,[a=authzid],n=<user>,r=<nonce>[,ext...]" and answers
// "r=<nonce><server nonce>,s=<salt>,i=<iterations>".
func (s *scramServer) clientFirst(msg string) ([]byte, bool, error) {
	// Kafka accepts only gs2 flag "n": no channel binding.
	rest, ok := strings.CutPrefix(msg, "n,")
	if !ok {
		return nil, false, errors.New("invalid SCRAM client first message: channel binding is not supported")
	}
	authzid, bare, ok := strings.Cut(rest, ",")
	if !ok || (authzid != "" && !strings.HasPrefix(authzid, "a=")) {
		return nil, false, errors.New("invalid SCRAM client first message format")
	}
	authzid = strings.TrimPrefix(authzid, "a=")
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) == 2 {
		return nil, false, errors.New("invalid SCRAM client first message format")
	}
	// saslname escapes ',' as =2C and '=' as =3D (RFC 5802 §5.1).
	user := strings.NewReplacer("=2C", ",", "=3D", "=").Replace(attrs[0][2:])
	cred, ok := s.creds.ScramCredential(s.mechanism, user)
	if !ok {
		return nil, false, errors.New("authentication failed: invalid user credentials")
	}
	if authzid != "" && authzid != user {
		return nil, false, &AuthError{"Authentication failed: Client requested an authorization id that is different from username"}
	}
	if cred.Iterations < ScramMinIterations {
		return nil, false, fmt.Errorf("iterations %d is less than the minimum %d for %s", cred.Iterations, ScramMinIterations, s.mechanism)
	}
	s.cred, s.user = cred, user
	s.gs2Header = msg[:len(msg)-len(bare)]
	s.clientFirstBare = bare
	s.nonce = attrs[1][2:] + s.serverNonce()
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return []byte(s.serverFirst), false, nil
}

// clientFinal reads "c=<gs2 header>,r=<nonce>[,ext...],p=<proof>", checks
// the proof and answers "v=<server signature>".
func (s *scramServer) clientFinal(msg string) ([]byte, bool, error) {
	withoutProof, proof64, ok := strings.Cut(msg, ",p=")
	if !ok {
		return nil, false, errors.New("invalid SCRAM client final message format")
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(s.gs2Header)) {
		return nil, false, errors.New("invalid SCRAM client final message: channel binding does not match")
	}
	// The nonce must end with the one the server sent back (the client's
	// and the server's): anything else is a replay or another
	// conversation. RFC 5802 wants it equal; Kafka's ScramSaslServer
	// checks only the end, and librdkafka (2.0, kcat) sends its own nonce
	// again in front of it, so the end is what we check too.
	if !strings.HasPrefix(attrs[1], "r=") || !strings.HasSuffix(attrs[1], s.nonce) {
		return nil, false, errors.New("invalid client nonce in the final client message")
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != s.hash().Size() {
		return nil, false, errors.New("invalid SCRAM client proof")
	}
	authMessage := s.clientFirstBare + "," + s.serverFirst + "," + withoutProof
	// ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the client
	// knew the password iff H(ClientKey) = StoredKey.
	clientKey := hmacOf(s.hash, s.cred.StoredKey, authMessage)
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	h := s.hash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, false, errors.New("invalid client credentials")
	}
	s.done = true
	return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(s.hash, s.cred.ServerKey, authMessage))), true, nil
}

// end build
