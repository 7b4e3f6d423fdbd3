module github.com/ndigo/ndigo

go 1.26.0

require (
	github.com/jonboulle/clockwork v0.5.0
	go.uber.org/fx v1.24.0
)

require (
	github.com/stretchr/testify v1.12.1 // indirect
	go.uber.org/dig v1.19.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.uber.org/multierr v1.10.0 // indirect
	go.uber.org/zap v1.26.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
