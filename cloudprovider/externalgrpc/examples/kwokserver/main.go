// Command kwokserver serves the kwok cloud provider over the external gRPC
// cloud provider protocol, so that --cloud-provider=externalgrpc can be tried
// (and tested) against a simulated cloud:
//
//	kwokserver --address=127.0.0.1:8086 --kubeconfig=kc --kwok-config=kwok.yaml \
//	  [--key=server.key --cert=server.crt --cacert=ca.crt]
//
// With the three TLS files the server requires a client certificate signed
// by --cacert (mTLS); without them it serves plaintext.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/externalgrpc/protos"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
)

type flags struct {
	address, kubeconfig, kwokConfig, namespace string
	key, cert, cacert                          string
}

func main() {
	var f flags
	fs := flag.NewFlagSet("kwokserver", flag.ExitOnError)
	fs.StringVar(&f.address, "address", "127.0.0.1:8086", "host:port to serve the protocol on")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster whose kwok nodes the provider manages")
	fs.StringVar(&f.kwokConfig, "kwok-config", "", "the kwok provider's config file (node groups, faults); empty: the ConfigMap kwok-provider-config of --namespace, as the kwok provider reads it")
	fs.StringVar(&f.namespace, "namespace", "kube-system", "namespace of the kwok provider's state ConfigMap")
	fs.StringVar(&f.key, "key", "", "server TLS key (with --cert and --cacert: mTLS)")
	fs.StringVar(&f.cert, "cert", "", "server TLS certificate")
	fs.StringVar(&f.cacert, "cacert", "", "CA that signs the client certificates")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		klog.ErrorS(err, "kwokserver failed")
		os.Exit(1)
	}
}

func run(ctx context.Context, f flags) error {
	logger := klog.FromContext(ctx)
	rc, err := clientcmd.BuildConfigFromFlags("", f.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading --kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	// Running this server is the explicit request for the kwok provider
	// (the chart deploys it only with externalGRPC.exampleServer.enabled):
	// it opts in, as --kwok-provider-enabled does for the autoscaler.
	opts := cloudprovider.Options{CloudConfig: f.kwokConfig, Namespace: f.namespace, KwokProviderEnabled: true}
	provider, err := kwok.Build(ctx, cloudprovider.BuildOptions{Options: opts, KubeClient: client, InformerFactory: factory})
	if err != nil {
		return fmt.Errorf("building the kwok provider: %w", err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	var srvOpts []grpc.ServerOption
	if f.key != "" || f.cert != "" || f.cacert != "" {
		tc, err := serverTLS(f)
		if err != nil {
			return err
		}
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(tc)))
	}
	lis, err := net.Listen("tcp", f.address)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", f.address, err)
	}
	srv := grpc.NewServer(srvOpts...)
	protos.RegisterCloudProviderServer(srv, newServer(provider))
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	logger.Info("Serving the kwok provider over the external gRPC protocol", "address", lis.Addr().String(), "mTLS", f.key != "")
	serveErr := srv.Serve(lis)
	// Save the instances still pending, so that a restarted server finds them.
	saveCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := provider.Cleanup(saveCtx); err != nil {
		logger.Error(err, "Saving the kwok provider state on shutdown")
	}
	return serveErr
}

func serverTLS(f flags) (*tls.Config, error) {
	if f.key == "" || f.cert == "" || f.cacert == "" {
		return nil, errors.New("--key, --cert and --cacert go together")
	}
	pair, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("loading --cert and --key: %w", err)
	}
	ca, err := os.ReadFile(f.cacert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--cacert %s holds no PEM certificate", f.cacert)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert,
		MinVersion: tls.VersionTLS12}, nil
}
