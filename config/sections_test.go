package config

// The typed backend sections of a parsed Config, for the tests: each
// returns an empty section when the file chose another backend.

func (c *Config) redis() *RedisConfig         { return sectionAs[RedisConfig](c) }
func (c *Config) postgres() *PostgresConfig   { return sectionAs[PostgresConfig](c) }
func (c *Config) mysql() *MySQLConfig         { return sectionAs[MySQLConfig](c) }
func (c *Config) etcd() *EtcdConfig           { return sectionAs[EtcdConfig](c) }
func (c *Config) zookeeper() *ZooKeeperConfig { return sectionAs[ZooKeeperConfig](c) }

func sectionAs[T any](c *Config) *T {
	if s, ok := any(c.Backend).(*T); ok {
		return s
	}
	return new(T)
}

func sameBackend(a, b *Config) bool { return a.SameBackend(b) }
