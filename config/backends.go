package config

import (
	"reflect"
	"strings"
)

// backends is the registry of the backends a file may choose, in the
// order messages list them: one field per backend, its yaml tag the key of
// the backend's section, its type the section as yaml.v3 decodes it (a
// rawSection, in the backend's file beside its Section). Adding a backend
// is a driver package under lease/, a section file here (see redis.go)
// and one line below.
type backends struct {
	Redis     rawRedis     `yaml:"redis"`
	Postgres  rawPostgres  `yaml:"postgres"`
	MySQL     rawMySQL     `yaml:"mysql"`
	Etcd      rawEtcd      `yaml:"etcd"`
	ZooKeeper rawZooKeeper `yaml:"zookeeper"`
}

// rawSection is a backend section as the file has it.
type rawSection interface {
	// section builds the Section from the file's values over the
	// section's defaults; d reports the values it cannot read.
	section(d *decoder) Section
}

// registration is one backend of the registry.
type registration struct {
	name string     // the section's key
	raw  rawSection // its decoded values, in a rawConfig
}

// registeredIn lists the backends with their sections in b.
func registeredIn(b *backends) []registration {
	v := reflect.ValueOf(b).Elem()
	out := make([]registration, 0, v.NumField())
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		out = append(out, registration{name: name, raw: v.Field(i).Addr().Interface().(rawSection)})
	}
	return out
}

// registered lists the backends, with empty sections.
func registered() []registration { return registeredIn(&backends{}) }
