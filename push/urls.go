package push

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// GoogleTokenURI is Google's OAuth 2.0 token endpoint, the token_uri of every
// service account the Firebase console gives out.
const GoogleTokenURI = "https://oauth2.googleapis.com/token"

// googleTokenOrigin is GoogleTokenURI's origin as origin writes it.
const googleTokenOrigin = "https://oauth2.googleapis.com:443"

// CheckTokenURI says whether the leader may POST a service account's signed
// assertion to tokenURI: only Google's token endpoint, or an endpoint on the
// same scheme, host and port as the operator's --fcm-endpoint (a local FCM
// stand-in serves its own). Anything else — a loopback or private address
// above all — would let a tenant make the leader call into the cluster's
// network (SSRF). Empty means the SDK's default, Google's.
func CheckTokenURI(tokenURI, fcmEndpoint string) error {
	if tokenURI == "" {
		return nil
	}
	u, err := url.Parse(tokenURI)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return fmt.Errorf("token_uri must be an http(s) URL")
	}
	if origin(u) == googleTokenOrigin && u.Path == "/token" {
		return nil
	}
	if fcmEndpoint != "" {
		if e, err := url.Parse(fcmEndpoint); err == nil && e.Host != "" && origin(u) == origin(e) {
			return nil
		}
	}
	return fmt.Errorf("token_uri must be Google's token endpoint (%s); this cluster does not call other hosts for a tenant", GoogleTokenURI)
}

// origin is scheme://host:port with the default port made explicit and the
// host lower-cased.
func origin(u *url.URL) string {
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(host), port)
}
