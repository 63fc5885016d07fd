// The cloud-controller-manager of k8s.io/cloud-provider v0.36.3 (upstream's framework, as every
// external provider builds it: this file follows the release's sample/basic_main.go) with one
// cloud provider registered, "fake": upstream's own k8s.io/cloud-provider/fake.Cloud, used as
// is and configured from --cloud-config. Built by hack/upstream-ccm/build.sh for the bench
// bench/node_init_vs_upstream.py (not part of `make test`).
//
// The differences from basic_main.go: the "fake" registration below, and the default client
// names (basic_main.go renames them "mycloud-external-..."; they only matter with
// --use-service-account-credentials, which the bench does not use).
//
// --cloud-config is JSON:
//
//	{"requestDelay": "50ms", "zone": "fake-zone-a", "region": "fake-region",
//	 "instanceType": "fake.small",
//	 "instances": {"<node name>": {"addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}}}
//
// Every instance exists, is running and has providerID fake://<node name>. Every call to the
// fake sleeps requestDelay first (fake.Cloud.RequestDelay: the per-call latency of a cloud).
// InstancesV2 is enabled, so initialising a Node is one InstanceMetadata call. The fake keeps a
// single address list for all instances (fake.Cloud.Addresses); the bench's Nodes each report
// their own InternalIP, and a cloud that answered another one would cost upstream a status
// patch per Node that kccm's bench does not make, so InstanceMetadata is the fake's own (its
// delay, call record and providerID map) with the addresses swapped for the instance's
// (fake.Cloud.OverrideInstanceMetadata, the fake's hook for this).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	"k8s.io/cloud-provider/fake"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli"
	cliflag "k8s.io/component-base/cli/flag"
	_ "k8s.io/component-base/logs/json/register"          // register optional JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/klog/v2"
)

const providerName = "fake"

type instanceConfig struct {
	Addresses []v1.NodeAddress `json:"addresses"`
}

type fakeConfig struct {
	RequestDelay string                    `json:"requestDelay"`
	Zone         string                    `json:"zone"`
	Region       string                    `json:"region"`
	InstanceType string                    `json:"instanceType"`
	Instances    map[string]instanceConfig `json:"instances"`
}

// newFakeCloud builds upstream's fake from the JSON cloud config.
func newFakeCloud(r io.Reader) (cloudprovider.Interface, error) {
	cfg := fakeConfig{Zone: "fake-zone-a", Region: "fake-region", InstanceType: "fake.small"}
	if r != nil {
		if err := json.NewDecoder(r).Decode(&cfg); err != nil {
			return nil, fmt.Errorf("fake cloud config: %w", err)
		}
	}
	var delay time.Duration
	if cfg.RequestDelay != "" {
		d, err := time.ParseDuration(cfg.RequestDelay)
		if err != nil {
			return nil, fmt.Errorf("fake cloud config: requestDelay: %w", err)
		}
		delay = d
	}
	providerIDs := make(map[types.NodeName]string, len(cfg.Instances))
	instanceTypes := make(map[types.NodeName]string, 2*len(cfg.Instances)+1)
	// fake.InstanceMetadata looks the type up by the Node's spec.providerID, which is empty
	// until the Node is initialised.
	instanceTypes[""] = cfg.InstanceType
	for name := range cfg.Instances {
		id := providerName + "://" + name
		providerIDs[types.NodeName(name)] = id
		instanceTypes[types.NodeName(name)] = cfg.InstanceType
		instanceTypes[types.NodeName(id)] = cfg.InstanceType
	}
	newCloud := func() *fake.Cloud {
		return &fake.Cloud{
			Provider:           providerName,
			EnableInstancesV2:  true,
			DisableRoutes:      true,
			ExistsByProviderID: true,
			ProviderID:         providerIDs,
			InstanceTypes:      instanceTypes,
			Zone:               cloudprovider.Zone{FailureDomain: cfg.Zone, Region: cfg.Region},
			RequestDelay:       delay,
			RouteMap:           map[string]*fake.Route{},
		}
	}
	cloud := newCloud()
	// The same fake without the override: its InstanceMetadata (delay, call record, providerID
	// map), then the instance's own addresses.
	inner := newCloud()
	cloud.OverrideInstanceMetadata = func(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
		meta, err := inner.InstanceMetadata(ctx, node)
		if meta != nil {
			meta.NodeAddresses = cfg.Instances[node.Name].Addresses
		}
		return meta, err
	}
	return cloud, nil
}

func init() {
	cloudprovider.RegisterCloudProvider(providerName, newFakeCloud)
}

// ---- below: the release's sample/basic_main.go (but for the client names, see above) ----

func main() {
	ccmOptions, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		klog.Fatalf("unable to initialize command options: %v", err)
	}

	fss := cliflag.NamedFlagSets{}
	command := app.NewCloudControllerManagerCommand(ccmOptions, cloudInitializer, app.DefaultInitFuncConstructors, names.CCMControllerAliases(), fss, wait.NeverStop)
	code := cli.Run(command)
	os.Exit(code)
}

func cloudInitializer(config *config.CompletedConfig) cloudprovider.Interface {
	cloudConfig := config.ComponentConfig.KubeCloudShared.CloudProvider

	// initialize cloud provider with the cloud provider name and config file provided
	cloud, err := cloudprovider.InitCloudProvider(cloudConfig.Name, cloudConfig.CloudConfigFile)
	if err != nil {
		klog.Fatalf("Cloud provider could not be initialized: %v", err)
	}
	if cloud == nil {
		klog.Fatalf("Cloud provider is nil")
	}

	if !cloud.HasClusterID() {
		if config.ComponentConfig.KubeCloudShared.AllowUntaggedCloud {
			klog.Warning("detected a cluster without a ClusterID.  A ClusterID will be required in the future.  Please tag your cluster to avoid any future issues")
		} else {
			klog.Fatalf("no ClusterID found.  A ClusterID is required for the cloud provider to function properly.  This check can be bypassed by setting the allow-untagged-cloud option")
		}
	}
	return cloud
}
