package security

import (
	"errors"
	"fmt"
	"strings"
)

// A JAASEntry is one login module of a JAAS configuration, as in
// `org.apache.kafka.common.security.plain.PlainLoginModule required
// username="admin" password="admin-secret" user_alice="alice-secret";`.
type JAASEntry struct {
	LoginModule string            // the class name
	Flag        string            // required, requisite, sufficient or optional
	Options     map[string]string // key=value pairs
}

// ParseJAAS reads a sasl.jaas.config value the way Kafka's JaasConfig
// does (java.io.StreamTokenizer): entries "module flag key=value ...;",
// values quoted with " or ' (backslash escapes) or bare words, // and /* */
// comments. A bare value must be a word: Java's tokenizer reads a value
// starting with a digit as a number and Kafka refuses it ("Value not
// specified"), so quote it.
func ParseJAAS(s string) ([]JAASEntry, error) {
	t := jaasTokenizer{s: s}
	var entries []JAASEntry
	for {
		tok, err := t.next()
		if err != nil {
			return nil, err
		}
		if tok.kind == tokEOF {
			break
		}
		if tok.kind != tokWord {
			return nil, fmt.Errorf("security: JAAS config: login module expected, found %q", tok.text)
		}
		e := JAASEntry{LoginModule: tok.text, Options: map[string]string{}}
		flag, err := t.next()
		if err != nil {
			return nil, err
		}
		if flag.kind == tokEOF {
			return nil, errors.New("security: JAAS config: login module control flag not specified")
		}
		switch f := strings.ToLower(flag.text); {
		case flag.kind == tokWord && (f == "required" || f == "requisite" || f == "sufficient" || f == "optional"):
			e.Flag = f
		default:
			return nil, fmt.Errorf("security: JAAS config: invalid login module control flag %q", flag.text)
		}
		for {
			key, err := t.next()
			if err != nil {
				return nil, err
			}
			if key.kind == tokEOF {
				return nil, errors.New("security: JAAS config: entry not terminated by semi-colon")
			}
			if key.kind == tokSemi {
				break
			}
			eq, err := t.next()
			if err != nil {
				return nil, err
			}
			val, err := t.next()
			if err != nil {
				return nil, err
			}
			if eq.kind != tokEquals || (val.kind != tokWord && val.kind != tokQuoted) {
				return nil, fmt.Errorf("security: JAAS config: value not specified for key %q", key.text)
			}
			e.Options[key.text] = val.text
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, errors.New("security: JAAS config: login module not specified")
	}
	return entries, nil
}

type tokenKind int

const (
	tokEOF tokenKind = iota
	tokWord
	tokQuoted
	tokEquals
	tokSemi
	tokOther // a number or any other character: never a valid value
)

type token struct {
	kind tokenKind
	text string
}

// jaasTokenizer splits a JAAS config as StreamTokenizer does with Kafka's
// settings: word characters are letters, '-', '_', '$' and, after the
// first, digits and '.'.
type jaasTokenizer struct {
	s string
	i int
}

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_' || c == '$' || c >= 0xA0
}

func isWordPart(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' || c == '.' }

func (t *jaasTokenizer) next() (token, error) {
	for t.i < len(t.s) {
		c := t.s[t.i]
		switch {
		case c <= ' ':
			t.i++
		case strings.HasPrefix(t.s[t.i:], "//"):
			if j := strings.IndexByte(t.s[t.i:], '\n'); j >= 0 {
				t.i += j + 1
			} else {
				t.i = len(t.s)
			}
		case strings.HasPrefix(t.s[t.i:], "/*"):
			j := strings.Index(t.s[t.i+2:], "*/")
			if j < 0 {
				return token{}, errors.New("security: JAAS config: unterminated comment")
			}
			t.i += 2 + j + 2
		case isWordStart(c):
			j := t.i
			for j < len(t.s) && isWordPart(t.s[j]) {
				j++
			}
			w := t.s[t.i:j]
			t.i = j
			return token{tokWord, w}, nil
		case c == '"' || c == '\'':
			return t.quoted(c)
		case c == '=':
			t.i++
			return token{tokEquals, "="}, nil
		case c == ';':
			t.i++
			return token{tokSemi, ";"}, nil
		default:
			j := t.i + 1
			for j < len(t.s) && (isWordPart(t.s[j])) {
				j++
			}
			w := t.s[t.i:j]
			t.i = j
			return token{tokOther, w}, nil
		}
	}
	return token{kind: tokEOF}, nil
}

// quoted reads a quoted string; like StreamTokenizer it ends at the
// closing quote or the end of the line.
func (t *jaasTokenizer) quoted(q byte) (token, error) {
	var b strings.Builder
	j := t.i + 1
	for j < len(t.s) && t.s[j] != q && t.s[j] != '\n' {
		if t.s[j] == '\\' && j+1 < len(t.s) {
			j++
			switch t.s[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default:
				b.WriteByte(t.s[j])
			}
			j++
			continue
		}
		b.WriteByte(t.s[j])
		j++
	}
	if j < len(t.s) && t.s[j] == q {
		j++
	}
	t.i = j
	return token{tokQuoted, b.String()}, nil
}
