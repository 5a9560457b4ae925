// Command hubwire-go-client calls the hub as a client, from Go: a chat
// command in each language behind it, one of them a stream.
//
//	hubwire-go-client [-hub unix:PATH]   (default: $HUBWIRE_HUB)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	hubwire "hubwire.dev/go"
)

type answer struct {
	Text string `json:"text"`
}

func main() {
	hub := flag.String("hub", os.Getenv("HUBWIRE_HUB"), "the hub: unix:PATH or tcp:HOST:PORT")
	topic := flag.String("topic", "go", "the fortune's topic")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, *hub, *topic); err != nil {
		fmt.Fprintln(os.Stderr, "hubwire-go-client:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, hub, topic string) error {
	var conn *hubwire.Connection
	var err error
	opts := hubwire.ConnectionOptions{Name: "hubwire-go-client"}
	switch {
	case strings.HasPrefix(hub, "unix:"):
		conn, err = hubwire.DialUnix(strings.TrimPrefix(hub, "unix:"), opts)
	case strings.HasPrefix(hub, "tcp:"):
		conn, err = hubwire.DialTCP(strings.TrimPrefix(hub, "tcp:"), opts)
	default:
		return fmt.Errorf("no hub address: pass -hub unix:PATH or set HUBWIRE_HUB (got %q)", hub)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Printf("go client: connected to %s (%s, %d methods)\n", conn.Peer().Peer.Name, conn.Peer().Peer.Lang, len(conn.Peer().Methods))

	// The Go provider, through the hub.
	a, err := hubwire.Call[answer](ctx, conn, "fortune", map[string]string{"topic": topic})
	if err != nil {
		return fmt.Errorf("fortune: %w", err)
	}
	fmt.Printf("go client: fortune -> %s\n", a.Text)

	// A declared failure comes back typed.
	_, err = hubwire.Call[answer](ctx, conn, "fortune", map[string]string{"topic": "rust"})
	var f *hubwire.Failure[struct {
		Kind   string   `json:"kind"`
		Topics []string `json:"topics"`
	}]
	if errors.As(err, &f) {
		fmt.Printf("go client: fortune about rust -> failure %s (topics: %s)\n", f.Value.Kind, strings.Join(f.Value.Topics, ", "))
	}

	// The Rust provider's unary command, and its server stream as an iterator.
	if a, err := hubwire.Call[answer](ctx, conn, "8ball", map[string]string{"question": "Is Go welcome here?"}); err == nil {
		fmt.Printf("go client: 8ball -> %s\n", a.Text)
	} else {
		return fmt.Errorf("8ball: %w", err)
	}
	items, err := hubwire.ServerStream[answer](ctx, conn, "countdown", map[string]int{"from": 3})
	if err != nil {
		return fmt.Errorf("countdown: %w", err)
	}
	var ticks []string
	for a, err := range items.All() {
		if err != nil {
			return fmt.Errorf("countdown: %w", err)
		}
		ticks = append(ticks, a.Text)
	}
	fmt.Printf("go client: countdown -> %s\n", strings.Join(ticks, ", "))
	return nil
}
