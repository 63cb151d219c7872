// Package tracing is Countersign's OpenTelemetry edge: it exports traces
// over OTLP/HTTP to the collector the standard OTEL_* environment variables
// name, and makes the spans of the edges, as decorators around what they
// decorate: a span per HTTP request (Handler), per chat platform API call
// (Transport) and per store transaction (Store); and trace ids in the log
// lines (LogHandler). The core makes its own spans (a tool call, a chat
// decision, an outbox delivery: bot.Options.Tracing).
//
// With no endpoint in the environment tracing is off: FromEnv returns nil,
// which builds no exporter and starts no goroutine, and every method of a
// nil *Tracing hands back what it was given.
//
// A span carries names, ids, status codes and kinds of failure: never a
// URL's query or a path segment that is not a fixed word, a header, a
// body, an argument, a fact's value or an error's message.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope names the tracer of the edges (its instrumentation scope).
const scope = "github.com/countersign/countersign/adapters/tracing"

// Options configure FromEnv.
type Options struct {
	// Service is the default service.name (OTEL_SERVICE_NAME wins).
	Service string
	// Version is service.version.
	Version string
	// Logger receives the exporter's failures (nil discards them).
	Logger *slog.Logger
	// Exporter, when set, replaces the OTLP/HTTP exporter (tests: an
	// in-memory exporter). Spans are still batched.
	Exporter sdktrace.SpanExporter
}

// Tracing is the tracer provider and the decorators of the edges. A nil
// *Tracing is tracing off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// The environment variables FromEnv reads itself (the exporter reads the
// other OTEL_EXPORTER_OTLP_* ones, such as headers, timeout, compression
// and certificates, from the process environment; the batch processor
// reads OTEL_BSP_*; the resource reads OTEL_RESOURCE_ATTRIBUTES).
const (
	EnvDisabled       = "OTEL_SDK_DISABLED"
	EnvExporter       = "OTEL_TRACES_EXPORTER"
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
)

// defaultEndpoint is the specification's OTLP/HTTP endpoint, used when
// OTEL_TRACES_EXPORTER=otlp names no endpoint.
const defaultEndpoint = "http://localhost:4318"

// FromEnv turns tracing on as getenv says, following the OpenTelemetry
// specification's variables: on when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// (used as is) or OTEL_EXPORTER_OTLP_ENDPOINT (+ /v1/traces) is set, or
// OTEL_TRACES_EXPORTER=otlp (then http://localhost:4318/v1/traces); off,
// returning nil, when none is, when OTEL_TRACES_EXPORTER=none or when
// OTEL_SDK_DISABLED=true. A value it cannot honour (another exporter or
// protocol, an endpoint that is not an http(s) URL, an unknown sampler) is
// an error naming the variable, never a silent default.
func FromEnv(ctx context.Context, getenv func(string) string, o Options) (*Tracing, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvDisabled)), "true") {
		return nil, nil
	}
	exporter := strings.TrimSpace(getenv(EnvExporter))
	switch exporter {
	case "", "otlp":
	case "none":
		return nil, nil
	default:
		return nil, fmt.Errorf("%s=%s: Countersign exports traces with otlp only; set it to otlp or none, or unset it", EnvExporter, exporter)
	}
	endpoint, err := tracesEndpoint(getenv)
	if err != nil {
		return nil, err
	}
	if endpoint == "" && exporter == "" && o.Exporter == nil {
		return nil, nil // nothing asks for traces
	}
	if endpoint == "" {
		endpoint = defaultEndpoint + "/v1/traces"
	}
	for _, name := range []string{EnvTracesProtocol, EnvProtocol} {
		if p := strings.TrimSpace(getenv(name)); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%s: Countersign exports traces over OTLP/HTTP with protobuf only; set it to http/protobuf, or unset it", name, p)
			}
			break
		}
	}
	sampler, err := samplerFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	exp := o.Exporter
	if exp == nil {
		if exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint)); err != nil {
			return nil, fmt.Errorf("traces: the OTLP/HTTP exporter for %s: %w", endpoint, err)
		}
	}
	res, err := newResource(ctx, getenv, o)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(loggingExporter{exp, log}),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return &Tracing{provider: tp, tracer: tp.Tracer(scope), prop: propagation.TraceContext{}}, nil
}

// tracesEndpoint is the URL traces are posted to, or "" when the
// environment names none.
func tracesEndpoint(getenv func(string) string) (string, error) {
	name, v := EnvTracesEndpoint, strings.TrimSpace(getenv(EnvTracesEndpoint))
	if v == "" {
		name, v = EnvEndpoint, strings.TrimSpace(getenv(EnvEndpoint))
		if v == "" {
			return "", nil
		}
		v = strings.TrimRight(v, "/") + "/v1/traces"
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: %q is not an http(s) URL; set it to the collector's OTLP/HTTP address, for example http://localhost:4318", name, getenv(name))
	}
	return v, nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names (default
// parentbased_always_on), with OTEL_TRACES_SAMPLER_ARG's ratio for the
// ratio samplers (default 1).
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.TrimSpace(getenv(EnvSampler))
	ratio := func() (float64, error) {
		arg := strings.TrimSpace(getenv(EnvSamplerArg))
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, fmt.Errorf("%s=%s: the ratio of %s must be a number from 0 to 1", EnvSamplerArg, arg, name)
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("%s=%s: not a sampler Countersign knows; use always_on, always_off, traceidratio, parentbased_always_on (the default), parentbased_always_off or parentbased_traceidratio", EnvSampler, name)
}

// newResource describes this process: service.name (OTEL_SERVICE_NAME,
// else o.Service), service.version, OTEL_RESOURCE_ATTRIBUTES and the SDK.
func newResource(ctx context.Context, getenv func(string) string, o Options) (*resource.Resource, error) {
	service := o.Service
	if service == "" {
		service = "countersign"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", service)}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	opts := []resource.Option{resource.WithAttributes(attrs...), resource.WithFromEnv(), resource.WithTelemetrySDK()}
	if s := strings.TrimSpace(getenv(EnvServiceName)); s != "" {
		opts = append(opts, resource.WithAttributes(attribute.String("service.name", s)))
	}
	res, err := resource.New(ctx, opts...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("traces: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	return res, nil
}

// Provider is the tracer provider for the core's spans
// (bot.Options.Tracing); nil when tracing is off.
func (t *Tracing) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Shutdown exports the spans still batched and stops the exporter. Call it
// once, after the last span ended (serve: after its loops stopped).
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// ForceFlush exports the spans batched so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.ForceFlush(ctx)
}

// loggingExporter logs a failed export on Countersign's log instead of
// handing it to OpenTelemetry's process-wide error handler.
type loggingExporter struct {
	sdktrace.SpanExporter
	log *slog.Logger
}

func (e loggingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.SpanExporter.ExportSpans(ctx, spans); err != nil {
		e.log.Warn("traces: export failed; these spans are lost", "spans", len(spans), "err", err)
	}
	return nil
}
