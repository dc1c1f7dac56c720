package redistest

// config is what the options set; the zero value is a plain, empty,
// unauthenticated node without persistence.
type config struct {
	aof      bool
	password string // requirepass (the default user)
	aclUser  string // extra ACL user, "" if none
	aclPass  string
	extra    []string // extra redis-server arguments
	tls      *CA      // serve TLS on a second port too (nil: no)
}

// Option configures the nodes started by Start.
type Option func(*config)

// WithAOF turns on the append-only file (--appendonly yes --appendfsync
// always), so a node that is killed and restarted comes back with every
// write it acknowledged. Without it a node restarts empty.
func WithAOF() Option {
	return func(c *config) { c.aof = true }
}

// WithPassword sets the default user's password (requirepass). URLs and
// clients of the node carry it. The password must not contain whitespace.
func WithPassword(pw string) Option {
	return func(c *config) { c.password = pw }
}

// WithACLUser adds an ACL user with full rights (on >pw +@all ~* &*). URLs
// and clients of the node then authenticate as that user. The default user
// is left as it is (no password unless WithPassword is given too), so
// connections without credentials still work. user and pw must not contain
// whitespace.
func WithACLUser(user, pw string) Option {
	return func(c *config) { c.aclUser, c.aclPass = user, pw }
}

// WithArgs appends raw redis-server command-line arguments, for example
// WithArgs("--maxmemory", "10mb"). They come after the package's own
// arguments and so override them.
func WithArgs(args ...string) Option {
	return func(c *config) { c.extra = append(c.extra, args...) }
}
