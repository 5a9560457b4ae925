// Command hubwire-go-chat is a chat command written in Go, the provider
// `make run`'s hub starts as a child process (examples/hubwire.toml):
//
//	fortune  {topic} -> {text}   e.g. {"topic": "go"} -> {"text": "fortune about go: Clear is better than clever."}
//
// An unknown topic is a declared failure: {"kind": "unknown_topic",
// "topics": [...]}. Started by a hubwire parent (HUBWIRE_FD set) it serves
// the parent; otherwise -unix PATH or -tcp HOST:PORT listens there.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	hubwire "hubwire.dev/go"
	"hubwire.dev/go/transport"
)

// The sayings, by topic.
var fortunes = map[string][]string{
	"go": {
		"Clear is better than clever.",
		"Don't communicate by sharing memory, share memory by communicating.",
		"A little copying is better than a little dependency.",
		"Errors are values.",
	},
	"hub": {
		"One connection, many calls.",
		"A plugin is a process that reads frames, not lines.",
	},
}

// Question is fortune's input.
type Question struct {
	Topic string `json:"topic"`
}

// Answer is what every chat command answers.
type Answer struct {
	Text string `json:"text"`
}

// UnknownTopic is fortune's declared failure.
type UnknownTopic struct {
	Kind   string   `json:"kind"`
	Topics []string `json:"topics"`
}

func fortune(ctx context.Context, q Question) (Answer, error) {
	topic := strings.ToLower(strings.TrimSpace(q.Topic))
	if topic == "" {
		topic = "go"
	}
	list, ok := fortunes[topic]
	if !ok {
		topics := make([]string, 0, len(fortunes))
		for t := range fortunes {
			topics = append(topics, t)
		}
		slices.Sort(topics)
		return Answer{}, hubwire.Fail(UnknownTopic{Kind: "unknown_topic", Topics: topics})
	}
	return Answer{Text: fmt.Sprintf("fortune about %s: %s", topic, list[rand.IntN(len(list))])}, nil
}

func main() {
	unix := flag.String("unix", "", "listen on this Unix socket path")
	tcp := flag.String("tcp", "", "listen on this TCP address")
	flag.Parse()
	provider := hubwire.NewProvider("gopher").
		Unary("fortune", hubwire.UnaryFunc(fortune)).
		Doc("fortune", "A Go proverb: {topic} -> {text}").
		Describe("fortune",
			map[string]any{"type": "object", "properties": map[string]any{"topic": map[string]any{"type": "string"}}},
			map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}},
			map[string]any{"type": "object", "properties": map[string]any{"kind": map[string]any{"const": "unknown_topic"}}})
	var err error
	switch {
	case transport.StartedByParent():
		// Stdout is not the protocol: this line becomes a log line of the hub.
		fmt.Println("hubwire-go-chat: serving the parent")
		err = provider.ServeChild()
	case *unix != "":
		var l transport.Listener
		if l, err = transport.ListenUnix(*unix); err == nil {
			log.Printf("hubwire-go-chat: listening on unix:%s", *unix)
			err = provider.Serve(l)
		}
	case *tcp != "":
		var l transport.Listener
		if l, err = transport.ListenTCP(*tcp); err == nil {
			log.Printf("hubwire-go-chat: listening on tcp:%s", l.Addr())
			err = provider.Serve(l)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: hubwire-go-chat -unix PATH | -tcp HOST:PORT   (or started by a hubwire parent, HUBWIRE_FD set)")
		os.Exit(2)
	}
	if err != nil {
		log.Fatalf("hubwire-go-chat: %v", err)
	}
}
