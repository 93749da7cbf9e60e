package security

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// converse runs a whole SASL exchange between franz-go's client mechanism
// and our server, token by token, as the SaslAuthenticate round trips
// would carry them. It returns the server's error, if any.
func converse(t *testing.T, client sasl.Mechanism, server saslServer) error {
	t.Helper()
	session, token, err := client.Authenticate(context.Background(), "127.0.0.1:9092")
	require.NoError(t, err)
	for range 10 {
		challenge, done, err := server.evaluate(token)
		if err != nil {
			return err
		}
		clientDone, next, err := session.Challenge(challenge)
		require.NoError(t, err, "the client refuses the server's answer")
		if done {
			require.True(t, clientDone, "the server finished before the client")
			return nil
		}
		require.False(t, clientDone, "the client finished before the server")
		token = next
	}
	t.Fatal("the exchange did not end")
	return nil
}

func scramCache(t *testing.T, mech, user, password string) *CredentialCache {
	t.Helper()
	cred, err := NewScramCredential(mech, password, 4096)
	require.NoError(t, err)
	c := NewCredentialCache()
	c.Set(mech, user, cred)
	return c
}

func TestScramServerAuthenticatesFranzGosClient(t *testing.T) {
	for _, mech := range []string{ScramSHA256, ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			creds := scramCache(t, mech, "alice", "alice-secret")
			client := scram.Auth{User: "alice", Pass: "alice-secret"}
			m := client.AsSha256Mechanism()
			if mech == ScramSHA512 {
				m = client.AsSha512Mechanism()
			}
			s := newScramServer(mech, creds)
			// The client checks the server's signature (v=...) in its
			// last Challenge: a server without the user's ServerKey fails there.
			require.NoError(t, converse(t, m, s))
			require.Equal(t, "alice", s.authorizationID())

			wrong := scram.Auth{User: "alice", Pass: "not-alices"}.AsSha256Mechanism()
			if mech == ScramSHA512 {
				wrong = scram.Auth{User: "alice", Pass: "not-alices"}.AsSha512Mechanism()
			}
			err := converse(t, wrong, newScramServer(mech, creds))
			require.ErrorContains(t, err, "invalid client credentials")

			unknown := scram.Auth{User: "bob", Pass: "x"}.AsSha256Mechanism()
			if mech == ScramSHA512 {
				unknown = scram.Auth{User: "bob", Pass: "x"}.AsSha512Mechanism()
			}
			require.Error(t, converse(t, unknown, newScramServer(mech, creds)))
		})
	}
}

func TestScramServerAcceptsOnlyItsOwnNonce(t *testing.T) {
	creds := scramCache(t, ScramSHA256, "alice", "alice-secret")
	s := newScramServer(ScramSHA256, creds)
	first, _, err := s.evaluate([]byte("n,,n=alice,r=clientnonce"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(first), "r=clientnonce"), "the server's nonce extends the client's")
	_, _, err = s.evaluate([]byte("c=biws,r=clientnonceFORGED,p=AAAA"))
	require.ErrorContains(t, err, "nonce")

	// Channel binding is refused, and so is a gs2 header the final message
	// does not repeat.
	_, _, err = newScramServer(ScramSHA256, creds).evaluate([]byte("p=tls-unique,,n=alice,r=x"))
	require.Error(t, err)
	s = newScramServer(ScramSHA256, creds)
	first, _, err = s.evaluate([]byte("n,,n=alice,r=abc"))
	require.NoError(t, err)
	nonce := strings.TrimPrefix(strings.Split(string(first), ",")[0], "r=")
	_, _, err = s.evaluate([]byte("c=eSws,r=" + nonce + ",p=AAAA"))
	require.ErrorContains(t, err, "channel binding")
}

func TestScramServerRefusesFewIterationsAndAnotherAuthzid(t *testing.T) {
	creds := scramCache(t, ScramSHA256, "alice", "alice-secret")
	weak, _ := creds.ScramCredential(ScramSHA256, "alice")
	weak.Iterations = 1000
	creds.Set(ScramSHA256, "weak", weak)
	_, _, err := newScramServer(ScramSHA256, creds).evaluate([]byte("n,,n=weak,r=abc"))
	require.ErrorContains(t, err, "less than the minimum 4096")

	_, _, err = newScramServer(ScramSHA256, creds).evaluate([]byte("n,a=bob,n=alice,r=abc"))
	require.EqualError(t, err, "Authentication failed: Client requested an authorization id that is different from username")
	_, _, err = newScramServer(ScramSHA256, creds).evaluate([]byte("n,a=alice,n=alice,r=abc"))
	require.NoError(t, err, "an authzid equal to the user is fine")
}

func TestScramCredentialReadsBackAsKafkaWritesIt(t *testing.T) {
	cred, err := NewScramCredential(ScramSHA512, "alice-secret", 8192)
	require.NoError(t, err)
	s := cred.String()
	require.Regexp(t, `^salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]{88},server_key=[A-Za-z0-9+/=]{88},iterations=8192$`, s)
	back, err := ParseScramCredential(s)
	require.NoError(t, err)
	require.Equal(t, cred, back)

	_, err = ParseScramCredential("salt=abc,iterations=4096")
	require.Error(t, err)
	_, err = NewScramCredential(ScramSHA256, "x", 100)
	require.ErrorContains(t, err, "iterations 100")
	_, err = NewScramCredential("SCRAM-MD5", "x", 4096)
	require.Error(t, err)
}

// RFC 7677's example conversation, byte for byte: user "user", password
// "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations; the client's
// proof is accepted and the server signature is the RFC's.
func TestScramServerFollowsRFC7677sExample(t *testing.T) {
	salt, err := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	require.NoError(t, err)
	cred, err := scramCredentialWithSalt(ScramSHA256, "pencil", salt, 4096)
	require.NoError(t, err)
	creds := NewCredentialCache()
	creds.Set(ScramSHA256, "user", cred)
	s := newScramServer(ScramSHA256, creds)
	s.serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
	first, done, err := s.evaluate([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	require.NoError(t, err)
	require.False(t, done)
	require.Equal(t, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", string(first))
	final, done, err := s.evaluate([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=", string(final))
}

func TestPlainServerChecksKafkasWay(t *testing.T) {
	users := map[string]string{"alice": "alice-secret"}
	s := &plainServer{users: users}
	require.NoError(t, converse(t, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), s))
	require.Equal(t, "alice", s.authorizationID())

	for token, want := range map[string]string{
		"\x00alice\x00wrong":           "Authentication failed: Invalid username or password",
		"\x00bob\x00alice-secret":      "Authentication failed: Invalid username or password",
		"\x00\x00x":                    "Authentication failed: username not specified",
		"\x00alice\x00":                "Authentication failed: password not specified",
		"alice":                        "Invalid SASL/PLAIN response: expected 3 tokens, got 1",
		"bob\x00alice\x00alice-secret": "Authentication failed: Client requested an authorization id that is different from username",
	} {
		_, _, err := (&plainServer{users: users}).evaluate([]byte(token))
		require.EqualError(t, err, want, "token %q", token)
	}
}
