package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestListenersParse(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"listeners":                      "PLAINTEXT://0.0.0.0:9092, ssl://0.0.0.0:9093,INTERNAL://10.0.0.5:9094",
		"advertised.listeners":           "PLAINTEXT://broker1.example:9092,SSL://broker1.example:19093",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_PLAINTEXT",
		"inter.broker.listener.name":     "internal",
	}, quietLogger)
	require.NoError(t, err)
	require.Equal(t, []Listener{
		{Name: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Addr: "0.0.0.0:9092", AdvertisedHost: "broker1.example", AdvertisedPort: 9092},
		{Name: "SSL", SecurityProtocol: "SSL", Addr: "0.0.0.0:9093", AdvertisedHost: "broker1.example", AdvertisedPort: 19093},
		{Name: "INTERNAL", SecurityProtocol: "SASL_PLAINTEXT", Addr: "10.0.0.5:9094", AdvertisedHost: "10.0.0.5", AdvertisedPort: 9094},
	}, cfg.Listeners)
	require.Equal(t, "INTERNAL", cfg.InterBrokerListener)
	// The single-listener fields describe the inter-broker listener.
	require.Equal(t, "10.0.0.5:9094", cfg.Listener)
	require.Equal(t, "10.0.0.5", cfg.AdvertisedHost)
	require.Equal(t, int32(9094), cfg.AdvertisedPort)
	require.True(t, cfg.Listeners[1].TLS())
}

func TestSecurityInterBrokerProtocolNamesTheListener(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
		"security.inter.broker.protocol": "SSL",
	}, quietLogger)
	require.NoError(t, err)
	require.Equal(t, "SSL", cfg.InterBrokerListener)
	require.Equal(t, "127.0.0.1:9093", cfg.Listener)
}

func TestBadListenerConfigNamesTheKeyAndValue(t *testing.T) {
	tests := map[string]struct {
		props map[string]string
		want  string
	}{
		"not NAME://host:port": {map[string]string{"listeners": "127.0.0.1:9092"},
			`invalid value "127.0.0.1:9092" for configuration listeners: "127.0.0.1:9092" is not NAME://host:port`},
		"bad port": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:http"},
			`configuration listeners: "PLAINTEXT://127.0.0.1:http": bad port "http"`},
		"duplicate name": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,plaintext://127.0.0.1:9093"},
			`configuration listeners: listener name PLAINTEXT appears twice`},
		"duplicate port": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092"},
			`configuration listeners: listeners PLAINTEXT and SSL both use port 9092`},
		"empty": {map[string]string{"listeners": ""}, `configuration listeners: no listener`},
		"unknown protocol": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
			"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:TLS"},
			`invalid value "PLAINTEXT:PLAINTEXT,EXTERNAL:TLS" for configuration listener.security.protocol.map: listener EXTERNAL: unknown security protocol "TLS"`},
		"listener without protocol": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093"},
			`configuration listener.security.protocol.map: no security protocol for listener EXTERNAL`},
		"advertised without listener": {map[string]string{"advertised.listeners": "SSL://broker1.example:9093"},
			`invalid value "SSL://broker1.example:9093" for configuration advertised.listeners: SSL is not a listener`},
		"advertised twice": {map[string]string{"advertised.listeners": "PLAINTEXT://a:9092,PLAINTEXT://b:9092"},
			`configuration advertised.listeners: listener name PLAINTEXT appears twice`},
		"inter-broker listener missing": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092", "inter.broker.listener.name": "INTERNAL"},
			`invalid value "INTERNAL" for configuration inter.broker.listener.name: the inter-broker listener INTERNAL is not a listener (PLAINTEXT)`},
		"no PLAINTEXT listener for the default": {map[string]string{"listeners": "SSL://127.0.0.1:9093"},
			`configuration inter.broker.listener.name: the inter-broker listener PLAINTEXT is not a listener (SSL)`},
		"both inter-broker keys": {map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
			`configuration inter.broker.listener.name: set inter.broker.listener.name or security.inter.broker.protocol, not both`},
		"unknown inter-broker protocol": {map[string]string{"security.inter.broker.protocol": "TLS"},
			`invalid value "TLS" for configuration security.inter.broker.protocol: unknown security protocol`},
		"second listener has no host": {map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://:9093"},
			`configuration advertised.listeners: clients need a host to connect to: set advertised.listeners when listeners has no host (listener SSL)`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseConfig(tt.props, quietLogger)
			require.ErrorContains(t, err, tt.want)
		})
	}
}
