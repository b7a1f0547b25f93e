package auth

// SMTPSettings is an SMTP server as a project (PUT /api/auth/smtp) or the
// operator (--smtp-*) sets it. Password is the clear password in a request
// or in the operator's config; stored, it is sealed with the cluster key.
//
// (Scaffolding of the accounts issue: the email helper owns this file.)
type SMTPSettings struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	From     string `json:"from"`
	FromName string `json:"fromName,omitempty"`
	// Security is "starttls" (required STARTTLS, port 587), "tls" (implicit
	// TLS, port 465) or "none" (plain; only for a host the operator allowed).
	Security string `json:"security"`
}
