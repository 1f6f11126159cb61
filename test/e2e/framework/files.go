package framework

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeServiceAccountKeys makes an RSA key pair for signing and verifying service account
// tokens and writes it as PEM files into dir, returning their paths.
func writeServiceAccountKeys(dir string) (pubPath, keyPath string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", fmt.Errorf("generate service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", fmt.Errorf("marshal service account public key: %w", err)
	}
	keyPath = filepath.Join(dir, "sa.key")
	pubPath = filepath.Join(dir, "sa.pub")
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(pubPath, pubPEM, 0o644); err != nil {
		return "", "", err
	}
	return pubPath, keyPath, nil
}

// randomToken returns 32 random hex digits.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// checkUsers reports every problem with users at once: empty or repeated names, and characters
// that the apiserver's token file (CSV) cannot hold.
func checkUsers(users []User) error {
	var problems []string
	seen := map[string]bool{adminUser: true}
	for i, u := range users {
		switch {
		case u.Name == "":
			problems = append(problems, fmt.Sprintf("user %d has no name", i))
		case seen[u.Name]:
			problems = append(problems, fmt.Sprintf("user name %q is used twice (or is the reserved admin)", u.Name))
		}
		seen[u.Name] = true
		for _, s := range append([]string{u.Name, u.Token}, u.Groups...) {
			if strings.ContainsAny(s, ",\"\r\n") {
				problems = append(problems, fmt.Sprintf("user %q: %q holds a comma, quote or newline", u.Name, s))
			}
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid Options.Users: %s", strings.Join(problems, "; "))
	}
	return nil
}

// writeTokenFile writes the kube-apiserver --token-auth-file: one CSV line
// token,user,uid,"group1,group2" per user.
func writeTokenFile(path string, users []User) error {
	var b strings.Builder
	for _, u := range users {
		fmt.Fprintf(&b, "%s,%s,%s,\"%s\"\n", u.Token, u.Name, u.Name, strings.Join(u.Groups, ","))
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}

// writeKubeconfig writes a kubeconfig that reaches server, trusting caPEM, as a bearer token.
func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: user}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago (each found
// while the others were held). Another process can take one before the caller binds it: callers
// retry when a child fails with "address already in use".
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreeAddr returns a 127.0.0.1 address whose port was free a moment ago (see freePorts).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(ports[0])
}
