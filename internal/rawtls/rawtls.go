// Package rawtls gives the TLS configurations of the raw TLS measurements
// (tests/tools/rawring, tests/tools/netbench tcp -tls): crypto/tls alone,
// TLS 1.3 as libp2p's TLS negotiates it, between processes a measurement
// started itself, so the server's certificate is a throwaway and nothing
// is verified. Never use these for anything but such a measurement.
package rawtls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/big"
	"time"
)

// Configs returns a server configuration with a fresh self-signed ECDSA
// certificate and a client configuration that accepts any.
func Configs() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("rawtls: a certificate for the measurement: %w", err)
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	client = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13} // #nosec: a measurement between our own processes
	return server, client, nil
}
