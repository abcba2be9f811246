// Package web is verifyd's account surface for people: the /auth/*
// endpoints (spec §5.9, §8) and the dashboard, served on the API's
// listener.
//
// Users sign in with an email and a password (hashed with Argon2id, RFC
// 9106); a session is a random token in an HttpOnly, SameSite=Strict
// cookie (Secure, and named __Host-verifyd_session, behind TLS), stored
// only as its SHA-256, ending after Options.SessionLifetime or
// Options.SessionIdle unused, and everywhere at a password change.
//
// Every state-changing browser request is guarded twice against cross-site
// forgery: it must be JSON with no foreign Origin or Sec-Fetch-Site
// (browserWrite), and with a session it must carry the session's CSRF
// token in X-CSRF-Token (an HMAC of the session id under a server key).
//
// Failed logins slow down per account and per source address (throttle),
// on top of spec §8's per-IP limits of /auth/link, /auth/register and
// /auth/login. The records live in storage (users.go) beside the
// accounts, each change one synced write.
package web
