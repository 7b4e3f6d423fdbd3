package config

import (
	"errors"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Framework and its sections are a realistic configuration for the
// loader's tests: the shape of app.Framework (which package app owns), with
// its rules registered here as test rules, so that config's tests need no
// other ndigo package.
type Framework struct {
	Node        string        `yaml:"node" validate:"max=128"`
	Redis       Redis         `yaml:"redis"`
	Log         Log           `yaml:"log"`
	Zone        string        `yaml:"zone" validate:"omitempty,timezone"`
	StopTimeout time.Duration `yaml:"stop-timeout" validate:"min=0"`
	Admin       Admin         `yaml:"admin"`
}

type Admin struct {
	Addr    string `yaml:"addr" validate:"required_with=Metrics,omitempty,listen_addr"`
	Metrics bool   `yaml:"metrics"`
}

type Redis struct {
	URL       SecretURL `yaml:"url" validate:"omitempty,redis_url"`
	Namespace string    `yaml:"namespace" default:"default" validate:"lock_namespace"`
}

type Log struct {
	Format    string `yaml:"format" default:"text" validate:"oneof=text json"`
	Level     string `yaml:"level" default:"info" validate:"oneof=debug info warn error"`
	SkipLevel string `yaml:"skip-level" default:"info" validate:"oneof=debug info warn error"`
}

var testNamespace = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

func init() {
	Rule("listen_addr", func(s string) error {
		if _, port, err := net.SplitHostPort(s); err == nil {
			if _, err = strconv.ParseUint(port, 10, 16); err == nil {
				return nil
			}
		}
		return errors.New("must be host:port or :port, such as 127.0.0.1:8081 (port 0 picks a free one)")
	})
	Rule("redis_url", func(s string) error {
		u, err := url.Parse(s)
		db := ""
		if err == nil {
			db = strings.Trim(u.Path, "/")
			_, err = strconv.ParseUint(db, 10, 32)
		}
		if u == nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" || (db != "" && err != nil) {
			return errors.New("must be a redis:// or rediss:// URL with a host and an optional /database number")
		}
		return nil
	})
	Rule("lock_namespace", func(s string) error {
		if !testNamespace.MatchString(s) {
			return errors.New("must match [A-Za-z0-9_.-]{1,64}")
		}
		return nil
	})
}
