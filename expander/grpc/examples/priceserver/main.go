// Command priceserver is an example server of the expander plug-in protocol
// (--expander=grpc): of the options it is sent, it prefers the node group
// whose template node has the lowest price label (--label, a number; groups
// without it come last). --mode makes it misbehave for tests: error, empty,
// hang or unknown (names a node group it was not sent).
//
//	priceserver --address=127.0.0.1:7000 [--cert=server.crt --key=server.key] [--label=price] [--mode=ok]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	grpclib "google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/expander/grpc/protos"
)

type server struct {
	protos.UnimplementedExpanderServer
	label, mode string
}

func (s *server) BestOptions(ctx context.Context, req *protos.BestOptionsRequest) (*protos.BestOptionsResponse, error) {
	switch s.mode {
	case "error":
		return nil, status.Error(codes.Internal, "priceserver told to fail")
	case "empty":
		return &protos.BestOptionsResponse{}, nil
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	case "unknown":
		return &protos.BestOptionsResponse{Options: []*protos.Option{{NodeGroupId: "no-such-group", NodeCount: 1}}}, nil
	}
	var best *protos.Option
	bestPrice := math.Inf(1)
	for _, o := range req.GetOptions() {
		price := math.Inf(1)
		var node apiv1.Node
		if b, ok := req.GetNodeBytesMap()[o.GetNodeGroupId()]; ok && node.Unmarshal(b) == nil {
			if v, err := strconv.ParseFloat(node.Labels[s.label], 64); err == nil {
				price = v
			}
		}
		if best == nil || price < bestPrice {
			best, bestPrice = o, price
		}
	}
	if best == nil {
		return &protos.BestOptionsResponse{}, nil
	}
	fmt.Printf("chose %s (price %v) of %d options\n", best.GetNodeGroupId(), bestPrice, len(req.GetOptions()))
	return &protos.BestOptionsResponse{Options: []*protos.Option{best}}, nil
}

func main() {
	address := flag.String("address", "127.0.0.1:7000", "listen address")
	cert := flag.String("cert", "", "server certificate (PEM); with --key, serve TLS")
	key := flag.String("key", "", "server key (PEM)")
	label := flag.String("label", "price", "template node label holding a group's price")
	mode := flag.String("mode", "ok", "ok, error, empty, hang or unknown")
	flag.Parse()
	if err := run(*address, *cert, *key, &server{label: *label, mode: *mode}); err != nil {
		fmt.Fprintln(os.Stderr, "priceserver:", err)
		os.Exit(1)
	}
}

func run(address, cert, key string, s *server) error {
	switch s.mode {
	case "ok", "error", "empty", "hang", "unknown":
	default:
		return fmt.Errorf("unknown --mode %q", s.mode)
	}
	var opts []grpclib.ServerOption
	if (cert == "") != (key == "") {
		return errors.New("--cert and --key go together")
	}
	if cert != "" {
		creds, err := credentials.NewServerTLSFromFile(cert, key)
		if err != nil {
			return err
		}
		opts = append(opts, grpclib.Creds(creds))
	}
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return err
	}
	g := grpclib.NewServer(opts...)
	protos.RegisterExpanderServer(g, s)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); g.Stop() }()
	fmt.Printf("serving the expander protocol on %s (mode %s)\n", lis.Addr(), s.mode)
	return g.Serve(lis)
}
