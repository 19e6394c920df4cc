// Karpenter's controllers (sigs.k8s.io/karpenter v1.15.0) against the test cluster's real
// kubelets: main is Karpenter's own kwok/main.go with the smallest cloud provider that
// manages nodes which already run. Each kubelet of tests/cluster registers its Node with
// spec.providerID drainer-test://NODE (nodes.sh) when a peer runs; the harness
// (karpenter.sh) writes one NodeClaim per Node, and this provider "launches" a NodeClaim
// by binding it to that Node: Karpenter's registration and initialization then adopt the
// Node as it would a new instance's, and deleting the NodeClaim runs Karpenter's real
// termination (taint, tiered drain, volume detachment, instance termination, the Node's
// finalizer). The provider launches no capacity of its own (it offers no instance type,
// so Karpenter's provisioner never creates a NodeClaim), and "terminating" an instance is
// recorded only: the kubelet stays, as a test needs it again.
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/awslabs/operatorpkg/status"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/karpenter/kwok/apis/v1alpha1"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/node/health"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

// providerPrefix is the scheme of the provider IDs the test kubelets register with.
const providerPrefix = "drainer-test://"

// realNodes is the cloud provider: its "instances" are the Nodes whose provider ID has
// providerPrefix. An instance exists while its Node exists and Delete was not called for
// the NodeClaim bound to it.
type realNodes struct {
	kubeClient client.Client

	mu sync.Mutex
	// terminated: provider IDs whose instance Delete terminated, until a new NodeClaim
	// is bound to the same Node (the harness adopts the Node again).
	terminated map[string]bool
}

func newRealNodes(kubeClient client.Client) *realNodes {
	return &realNodes{kubeClient: kubeClient, terminated: map[string]bool{}}
}

// wantedNode: the Node a NodeClaim asks for, by its label kubernetes.io/hostname (the
// NodeClaim CRD refuses a requirement on that key); "" when it names none.
func wantedNode(nc *v1.NodeClaim) string {
	return nc.Labels[corev1.LabelHostname]
}

// Create binds the NodeClaim to a free real Node: the one it names (wantedNode), else
// the first (by name) whose provider ID no other NodeClaim holds. No free Node: Karpenter
// is told the capacity is insufficient (it then deletes the NodeClaim).
func (p *realNodes) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	var nodes corev1.NodeList
	if err := p.kubeClient.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes, %w", err)
	}
	var claims v1.NodeClaimList
	if err := p.kubeClient.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	held := map[string]string{}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.UID != nc.UID && c.Status.ProviderID != "" {
			held[c.Status.ProviderID] = c.Name
		}
	}
	sort.Slice(nodes.Items, func(i, j int) bool { return nodes.Items[i].Name < nodes.Items[j].Name })
	want := wantedNode(nc)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, providerPrefix) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		if want != "" && n.Name != want {
			continue
		}
		if other, ok := held[n.Spec.ProviderID]; ok {
			if want != "" {
				return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("node %s is bound to nodeclaim %s", n.Name, other))
			}
			continue
		}
		p.mu.Lock()
		delete(p.terminated, n.Spec.ProviderID)
		p.mu.Unlock()
		log.FromContext(ctx).WithValues("node", n.Name, "provider-id", n.Spec.ProviderID).Info("bound nodeclaim to a real node")
		return toNodeClaim(n), nil
	}
	if want != "" {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no node %s with a provider ID %s...", want, providerPrefix))
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("no real node without a nodeclaim"))
}

// toNodeClaim: what the provider knows of the instance behind a Node (its name, provider
// ID, capacity, the labels that say what it is).
func toNodeClaim(n *corev1.Node) *v1.NodeClaim {
	labels := map[string]string{corev1.LabelHostname: n.Name}
	for _, k := range []string{corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable, corev1.LabelTopologyZone} {
		if v, ok := n.Labels[k]; ok {
			labels[k] = v
		}
	}
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: v1.NodeClaimStatus{
			NodeName:    n.Name,
			ProviderID:  n.Spec.ProviderID,
			Capacity:    n.Status.Capacity.DeepCopy(),
			Allocatable: n.Status.Allocatable.DeepCopy(),
		},
	}
}

// Delete terminates the instance: recorded (Get and List no longer return it); the kubelet
// goes on running. Always "not found" afterwards, as an instance that is gone at once.
func (p *realNodes) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	p.mu.Lock()
	p.terminated[nc.Status.ProviderID] = true
	p.mu.Unlock()
	log.FromContext(ctx).WithValues("nodeclaim", nc.Name, "provider-id", nc.Status.ProviderID).Info("instance terminated (recorded; the kubelet stays)")
	return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated", nc.Status.ProviderID))
}

func (p *realNodes) isTerminated(providerID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terminated[providerID]
}

// Get: the instance of a provider ID, from its Node (not found once terminated, or when
// no Node has that ID).
func (p *realNodes) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	if !strings.HasPrefix(providerID, providerPrefix) || p.isTerminated(providerID) {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no instance %s", providerID))
	}
	var nodes corev1.NodeList
	if err := p.kubeClient.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes, %w", err)
	}
	for i := range nodes.Items {
		if nodes.Items[i].Spec.ProviderID == providerID {
			return toNodeClaim(&nodes.Items[i]), nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no node with provider ID %s", providerID))
}

// List: the instances bound to a NodeClaim and not terminated, each while its Node exists.
func (p *realNodes) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	var nodes corev1.NodeList
	if err := p.kubeClient.List(ctx, &nodes); err != nil {
		return nil, fmt.Errorf("listing nodes, %w", err)
	}
	var claims v1.NodeClaimList
	if err := p.kubeClient.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	bound := map[string]bool{}
	for i := range claims.Items {
		bound[claims.Items[i].Status.ProviderID] = true
	}
	var out []*v1.NodeClaim
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if strings.HasPrefix(n.Spec.ProviderID, providerPrefix) && bound[n.Spec.ProviderID] && !p.isTerminated(n.Spec.ProviderID) {
			out = append(out, toNodeClaim(n))
		}
	}
	return out, nil
}

// GetInstanceTypes: none. The real nodes are all there is: Karpenter's provisioner finds
// no instance type for a pending pod and launches nothing.
func (p *realNodes) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return nil, nil
}

func (p *realNodes) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

func (p *realNodes) Reboot(context.Context, *v1.NodeClaim, string) error {
	return cloudprovider.NewNodeRebootNotImplementedError()
}

// RepairPolicies: none (a NotReady test kubelet is a test's doing, never repaired).
func (p *realNodes) RepairPolicies() []cloudprovider.RepairPolicy { return nil }

func (p *realNodes) Name() string { return "drainer-test" }

// GetSupportedNodeClasses: Karpenter's kwok NodeClass type (KWOKNodeClass of
// karpenter.kwok.sh), whose CRD ships in the module; the harness writes one, Ready.
func (p *realNodes) GetSupportedNodeClasses() []status.Object {
	return []status.Object{&v1alpha1.KWOKNodeClass{}}
}

func main() {
	ctx, op := operator.NewOperator()
	provider := newRealNodes(op.GetClient())
	cloudProvider := overlay.Decorate(provider, op.GetClient(), op.InstanceTypeStore)
	repairPolicyMatcher := lo.Must(health.NewRepairPolicyMatcher(ctx, cloudProvider))
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider, state.WithRepairPolicyMatcher(repairPolicyMatcher))
	op.
		WithControllers(ctx, controllers.NewControllers(
			ctx,
			op.Manager,
			op.Clock,
			op.GetClient(),
			op.EventRecorder,
			cloudProvider,
			provider,
			clusterState,
			op.InstanceTypeStore,
			op.PredictionStore,
		)...).Start(ctx)
}
