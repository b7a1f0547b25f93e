// Package auth owns projects, API keys, accounts, passwords, sessions, TOTP,
// roles, rate limits and access rules, built on raftstore's replicated tree.
//
// The pieces in this package that need no replicated state live in their own
// files and can be used on their own:
//
//   - password.go: argon2id hashing behind a semaphore, so a flood of logins
//     costs bounded memory, plus the password policy.
//   - token.go: random tokens and IDs, and how tokens are hashed at rest.
//   - rules.go: the per-project access rules, CEL expressions selected by
//     path patterns.
//   - errors.go: the package's sentinel errors and e-mail validation.
package auth
