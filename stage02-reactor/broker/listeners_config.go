package broker

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/kafkaworkbook/workbook/stage01-log/commitlog"
)

// Listener is one of the broker's listeners, as Kafka's listeners,
// advertised.listeners and listener.security.protocol.map describe it:
//
//	listeners=PLAINTEXT://:9092,SSL://:9093,INTERNAL://10.0.0.5:9094
//	advertised.listeners=PLAINTEXT://broker1.example:9092,SSL://broker1.example:9093,INTERNAL://10.0.0.5:9094
//	listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT
//	inter.broker.listener.name=INTERNAL
//
// A client is told the addresses of the listener it asked on: a Metadata
// request that came in on SSL is answered with every broker's SSL address.
type Listener struct {
	Name             string // PLAINTEXT, SSL, INTERNAL, ...: upper case, unique
	SecurityProtocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	Addr             string // host:port to listen on; port 0: the kernel chooses
	// AdvertisedHost and AdvertisedPort are what Metadata tells clients
	// who ask on this listener (advertised.listeners, defaulting to the
	// listener's own address). Port 0 becomes the port the kernel chose,
	// in New.
	AdvertisedHost string
	AdvertisedPort int32
}

// HostPort is the advertised "host:port".
func (l Listener) HostPort() string {
	return net.JoinHostPort(l.AdvertisedHost, strconv.Itoa(int(l.AdvertisedPort)))
}

// TLS reports whether the listener's connections speak TLS (SSL, SASL_SSL).
func (l Listener) TLS() bool { return l.SecurityProtocol == "SSL" || l.SecurityProtocol == "SASL_SSL" }

// The listener keys, with Kafka's names and defaults.
const (
	KeyListeners                   = "listeners"
	KeyAdvertisedListeners         = "advertised.listeners"
	KeyListenerSecurityProtocolMap = "listener.security.protocol.map"
	KeyInterBrokerListenerName     = "inter.broker.listener.name"
	KeySecurityInterBrokerProtocol = "security.inter.broker.protocol"

	// The workbook listens on loopback by default; Kafka's default listens
	// on every interface.
	defaultListeners           = "PLAINTEXT://127.0.0.1:9092"
	defaultSecurityProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)

// SecurityProtocols are the security protocols Kafka knows, in the order
// of their ids on the wire (UpdateMetadata's security_protocol: 0, 1, 2, 3).
var SecurityProtocols = []string{"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

var listenerKeys = []string{KeyListeners, KeyAdvertisedListeners, KeyListenerSecurityProtocolMap,
	KeyInterBrokerListenerName, KeySecurityInterBrokerProtocol}

// parseListeners reads the listener keys into c.Listeners and
// c.InterBrokerListener, and sets c.Listener, c.AdvertisedHost and
// c.AdvertisedPort to the inter-broker listener's. Errors name the key
// and its value.
func parseListeners(c *Config, props map[string]string) error {
	raw := propOr(props, KeyListeners, defaultListeners)
	ls, err := parseEndpoints(raw)
	if err != nil {
		return &commitlog.ConfigError{Key: KeyListeners, Value: raw, Reason: err.Error()}
	}
	if len(ls) == 0 {
		return &commitlog.ConfigError{Key: KeyListeners, Value: raw, Reason: "no listener: want NAME://host:port[,NAME://host:port...]"}
	}
	ports := map[string]string{}
	for _, l := range ls {
		_, port, _ := net.SplitHostPort(l.Addr)
		if other, dup := ports[port]; dup && port != "0" {
			return &commitlog.ConfigError{Key: KeyListeners, Value: raw,
				Reason: fmt.Sprintf("listeners %s and %s both use port %s", other, l.Name, port)}
		}
		ports[port] = l.Name
	}

	rawMap := propOr(props, KeyListenerSecurityProtocolMap, defaultSecurityProtocolMap)
	protocols, err := parseProtocolMap(rawMap)
	if err != nil {
		return &commitlog.ConfigError{Key: KeyListenerSecurityProtocolMap, Value: rawMap, Reason: err.Error()}
	}
	for i := range ls {
		p, ok := protocols[ls[i].Name]
		if !ok {
			return &commitlog.ConfigError{Key: KeyListenerSecurityProtocolMap, Value: rawMap,
				Reason: fmt.Sprintf("no security protocol for listener %s: add %s:<protocol>", ls[i].Name, ls[i].Name)}
		}
		ls[i].SecurityProtocol = p
	}

	// Each listener is advertised as itself unless advertised.listeners
	// says otherwise; an advertised listener must be a listener.
	for i := range ls {
		host, port, _ := net.SplitHostPort(ls[i].Addr)
		n, _ := strconv.Atoi(port)
		ls[i].AdvertisedHost, ls[i].AdvertisedPort = host, int32(n)
	}
	rawAdv := props[KeyAdvertisedListeners]
	adv, err := parseEndpoints(rawAdv)
	if err != nil {
		return &commitlog.ConfigError{Key: KeyAdvertisedListeners, Value: rawAdv, Reason: err.Error()}
	}
	for _, a := range adv {
		i := slices.IndexFunc(ls, func(l Listener) bool { return l.Name == a.Name })
		if i < 0 {
			return &commitlog.ConfigError{Key: KeyAdvertisedListeners, Value: rawAdv,
				Reason: fmt.Sprintf("%s is not a listener: advertised listeners must be named in listeners (%s)", a.Name, names(ls))}
		}
		host, port, _ := net.SplitHostPort(a.Addr)
		n, _ := strconv.Atoi(port)
		ls[i].AdvertisedHost, ls[i].AdvertisedPort = host, int32(n)
	}

	c.InterBrokerListener, err = interBrokerListener(props, ls)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if l.AdvertisedHost == "" || l.AdvertisedHost == "0.0.0.0" || l.AdvertisedHost == "::" {
			return &commitlog.ConfigError{Key: KeyAdvertisedListeners, Value: rawAdv,
				Reason: fmt.Sprintf("clients need a host to connect to: set advertised.listeners when listeners has no host (listener %s)", l.Name)}
		}
	}
	c.Listeners = ls
	ib := ls[slices.IndexFunc(ls, func(l Listener) bool { return l.Name == c.InterBrokerListener })]
	c.Listener, c.AdvertisedHost, c.AdvertisedPort = ib.Addr, ib.AdvertisedHost, ib.AdvertisedPort
	return nil
}

// interBrokerListener is the listener other brokers reach this one on:
// inter.broker.listener.name, or the listener named after
// security.inter.broker.protocol (Kafka's ListenerName.forSecurityProtocol),
// PLAINTEXT by default; at most one of the two keys may be set.
func interBrokerListener(props map[string]string, ls []Listener) (string, error) {
	name, byName := props[KeyInterBrokerListenerName]
	proto, byProto := props[KeySecurityInterBrokerProtocol]
	key, value := KeyInterBrokerListenerName, name
	switch {
	case byName && byProto:
		return "", &commitlog.ConfigError{Key: KeyInterBrokerListenerName, Value: name,
			Reason: "set inter.broker.listener.name or security.inter.broker.protocol, not both"}
	case byProto:
		key, value = KeySecurityInterBrokerProtocol, proto
		name = strings.ToUpper(strings.TrimSpace(proto))
		if !slices.Contains(SecurityProtocols, name) {
			return "", &commitlog.ConfigError{Key: key, Value: value,
				Reason: "unknown security protocol: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"}
		}
	case !byName:
		name = "PLAINTEXT"
	}
	name = strings.ToUpper(strings.TrimSpace(name))
	if !slices.ContainsFunc(ls, func(l Listener) bool { return l.Name == name }) {
		return "", &commitlog.ConfigError{Key: key, Value: value,
			Reason: fmt.Sprintf("the inter-broker listener %s is not a listener (%s): name one in inter.broker.listener.name", name, names(ls))}
	}
	return name, nil
}

// parseEndpoints reads "NAME://host:port,NAME://host:port"; names are
// upper-cased, as Kafka normalizes them, and must be distinct.
func parseEndpoints(v string) ([]Listener, error) {
	var out []Listener
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, addr, ok := strings.Cut(part, "://")
		name = strings.ToUpper(strings.TrimSpace(name))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME://host:port", part)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%q: not host:port: %v", part, err)
		}
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return nil, fmt.Errorf("%q: bad port %q", part, port)
		}
		if slices.ContainsFunc(out, func(l Listener) bool { return l.Name == name }) {
			return nil, fmt.Errorf("listener name %s appears twice", name)
		}
		out = append(out, Listener{Name: name, Addr: net.JoinHostPort(host, port)})
	}
	return out, nil
}

// parseProtocolMap reads "NAME:PROTOCOL,NAME:PROTOCOL".
func parseProtocolMap(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, proto, ok := strings.Cut(part, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", part)
		}
		if !slices.Contains(SecurityProtocols, proto) {
			return nil, fmt.Errorf("listener %s: unknown security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", name, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener %s appears twice", name)
		}
		out[name] = proto
	}
	return out, nil
}

// names lists the listeners' names, for errors.
func names(ls []Listener) string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return strings.Join(out, ", ")
}
