// kccm-vcsim: govmomi's vCenter simulator (SOAP + the vAPI REST endpoints used for tags),
// with the inventory, guest data and test controls kccm's vsphere tests need.
//
// The vcsim command is a nested module the Go proxy does not serve as a command, so this
// small main builds the same simulator from github.com/vmware/govmomi/simulator.
//
// On start it prints one JSON line on stdout: {"url": ..., "ca_file": ..., "thumbprint": ...}.
//
// Test controls (plain HTTP on the same listener, under /kccm/):
//
//	GET    /kccm/calls        SOAP calls per method and REST calls per "METHOD path" since start
//	DELETE /kccm/calls        reset the counts
//	POST   /kccm/faults       add a SOAP fault rule (JSON, see faultSpec); GET lists the stats
//	DELETE /kccm/faults       clear every fault rule
//	POST   /kccm/delays       delay a SOAP method (JSON: method, delayMs, count)
//	POST   /kccm/rest-faults  answer REST requests under a path with a status (pathPrefix, status, count)
//	DELETE /kccm/rest-faults  clear REST faults and delays
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

type options struct {
	listen, username, password string
	datacenters, clusters      int
	clusterHosts, standalone   int
	vms                        int
	ipBase, extIPBase          string
	hostPrefix, guestID        string
	cpus, memoryMB             int
	insecureHTTP               bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (loopback)")
	flag.StringVar(&o.username, "username", "user", "the only user that can log in")
	flag.StringVar(&o.password, "password", "pass", "its password")
	flag.IntVar(&o.datacenters, "dc", 1, "datacenters")
	flag.IntVar(&o.clusters, "cluster", 1, "clusters per datacenter")
	flag.IntVar(&o.clusterHosts, "host", 3, "hosts per cluster")
	flag.IntVar(&o.standalone, "standalone-host", 0, "standalone hosts per datacenter")
	flag.IntVar(&o.vms, "vm", 2, "VMs per resource pool (cluster and standalone host)")
	flag.StringVar(&o.ipBase, "ip-base", "10.0.0.0", "guest IPs are allocated from this IPv4 address up")
	flag.StringVar(&o.extIPBase, "ext-ip-base", "", "if set, a second NIC on network \"External\" with IPs from here")
	flag.StringVar(&o.hostPrefix, "hostname-prefix", "", "prefix of every guest host name")
	flag.StringVar(&o.guestID, "guest-id", "ubuntu64Guest", "guestId of every VM")
	flag.IntVar(&o.cpus, "cpus", 2, "vCPUs of every VM")
	flag.IntVar(&o.memoryMB, "memory-mb", 4096, "memory of every VM")
	flag.BoolVar(&o.insecureHTTP, "http", false, "serve plain HTTP instead of HTTPS")
	flag.Parse()
	return o
}

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	o := parseFlags()

	model := simulator.VPX()
	model.Datacenter = o.datacenters
	model.Cluster = o.clusters
	model.ClusterHost = o.clusterHosts
	model.Host = o.standalone
	model.Machine = o.vms
	if err := model.Create(); err != nil {
		log.Fatalf("creating the inventory: %v", err)
	}
	defer model.Remove()

	svc := model.Service
	svc.RegisterEndpoints = true
	svc.Listen = &url.URL{Host: o.listen, User: url.UserPassword(o.username, o.password)}
	if !o.insecureHTTP {
		svc.TLS = new(tls.Config)
	}
	registry := svc.Context.Map

	if err := fixVMs(registry, o); err != nil {
		log.Fatalf("preparing the VMs: %v", err)
	}

	ctl := newControls(svc)
	registry.Handler = ctl.soapHook
	if svc.ServeMux == nil {
		svc.ServeMux = http.NewServeMux()
	}
	ctl.register(svc.ServeMux)

	server := svc.NewServer()
	defer server.Close()
	// Count REST calls and apply REST faults in front of the simulator's own mux.
	server.Config.Handler = ctl.restWrapper(server.Config.Handler)

	public := *server.URL
	public.User = nil // the credentials are the caller's to know
	ready := map[string]string{"url": public.String()}
	if !o.insecureHTTP {
		caFile, err := server.CertificateFile()
		if err != nil {
			log.Fatalf("writing the CA file: %v", err)
		}
		ready["ca_file"] = caFile
		ready["thumbprint"] = server.CertificateInfo().ThumbprintSHA1
	}
	out, _ := json.Marshal(ready)
	fmt.Println(string(out))

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	<-signals
}

// fixVMs gives every VM the guest data a VM with VMware Tools reports (a host name, one IP per
// NIC, guest.net), the configured hardware, and valid enum values for the runtime states that
// vcsim leaves empty: pyvmomi cannot decode an empty faultToleranceState/recordReplayState.
func fixVMs(registry *simulator.Registry, o options) error {
	ip, err := newAllocator(o.ipBase)
	if err != nil {
		return err
	}
	var ext *allocator
	if o.extIPBase != "" {
		if ext, err = newAllocator(o.extIPBase); err != nil {
			return err
		}
	}
	var vms []*simulator.VirtualMachine
	for _, obj := range registry.AllReference("VirtualMachine") {
		if vm, ok := obj.(*simulator.VirtualMachine); ok {
			vms = append(vms, vm)
		}
	}
	// Stable addresses: allocate in name order.
	sort.Slice(vms, func(i, j int) bool { return vms[i].Name < vms[j].Name })
	for _, vm := range vms {
		fixVM(vm, o, ip.next(), ext)
	}
	return nil
}

func fixVM(vm *simulator.VirtualMachine, o options, address string, ext *allocator) {
	hostname := o.hostPrefix + strings.ToLower(strings.ReplaceAll(vm.Name, "_", "-"))
	nics := []types.GuestNicInfo{{
		Network:        "VM Network",
		IpAddress:      []string{address},
		MacAddress:     mac(address, 0),
		Connected:      true,
		DeviceConfigId: 4000,
	}}
	if ext != nil {
		extAddress := ext.next()
		nics = append(nics, types.GuestNicInfo{
			Network:        "External",
			IpAddress:      []string{extAddress},
			MacAddress:     mac(extAddress, 1),
			Connected:      true,
			DeviceConfigId: 4001,
		})
	}
	if vm.Guest == nil {
		vm.Guest = new(types.GuestInfo)
	}
	vm.Guest.HostName = hostname
	vm.Guest.IpAddress = address
	vm.Guest.Net = nics
	vm.Guest.GuestId = o.guestID
	vm.Summary.Guest = &types.VirtualMachineGuestSummary{
		GuestId: o.guestID, HostName: hostname, IpAddress: address,
		ToolsRunningStatus: vm.Guest.ToolsRunningStatus,
	}
	// vcsim derives BIOS UUIDs from VM names, so two simulators would share them; real
	// vCenters do not. Derive them from the host name instead (prefix included).
	biosUUID := uuid.NewSHA1(uuid.NameSpaceOID, []byte("kccm-vcsim/"+hostname)).String()
	vm.Summary.Config.Uuid = biosUUID
	if vm.Config != nil {
		vm.Config.Uuid = biosUUID
		vm.Config.GuestId = o.guestID
		vm.Config.Hardware.NumCPU = int32(o.cpus)
		vm.Config.Hardware.MemoryMB = int32(o.memoryMB)
	}
	vm.Summary.Config.GuestId = o.guestID
	vm.Summary.Config.NumCpu = int32(o.cpus)
	vm.Summary.Config.MemorySizeMB = int32(o.memoryMB)
	fixRuntime(&vm.Runtime)
	fixRuntime(&vm.Summary.Runtime)
}

func fixRuntime(r *types.VirtualMachineRuntimeInfo) {
	if r.FaultToleranceState == "" {
		r.FaultToleranceState = types.VirtualMachineFaultToleranceStateNotConfigured
	}
	if r.RecordReplayState == "" {
		r.RecordReplayState = types.VirtualMachineRecordReplayStateInactive
	}
}

func mac(address string, nic int) string {
	p := net.ParseIP(address).To4()
	return fmt.Sprintf("00:50:56:%02x:%02x:%02x", p[1]+byte(nic*0x40), p[2], p[3])
}

type allocator struct{ ip net.IP }

func newAllocator(base string) (*allocator, error) {
	ip := net.ParseIP(base).To4()
	if ip == nil {
		return nil, fmt.Errorf("%q is not an IPv4 address", base)
	}
	return &allocator{ip: ip}, nil
}

// next returns the next address, skipping .0 and .255 host parts.
func (a *allocator) next() string {
	for {
		for i := 3; i >= 0; i-- {
			a.ip[i]++
			if a.ip[i] != 0 {
				break
			}
		}
		if a.ip[3] != 0 && a.ip[3] != 255 {
			return a.ip.String()
		}
	}
}

// ---- test controls -------------------------------------------------------------------------

type delayRule struct {
	Method  string `json:"method"`
	DelayMs int    `json:"delayMs"`
	Count   int    `json:"count"` // 0 = every call
	used    int
}

type restFault struct {
	PathPrefix string `json:"pathPrefix"`
	Status     int    `json:"status"`
	DelayMs    int    `json:"delayMs"`
	Count      int    `json:"count"` // 0 = every request
	used       int
}

type faultSpec struct {
	Method      string  `json:"method"`
	ObjectType  string  `json:"objectType"`
	ObjectName  string  `json:"objectName"`
	Fault       string  `json:"fault"`
	Message     string  `json:"message"`
	Count       int     `json:"count"`
	Skip        int     `json:"skip"`
	DelayMs     int     `json:"delayMs"`
	Probability float64 `json:"probability"`
}

var faultTypes = map[string]simulator.FaultType{
	"":                      simulator.FaultTypeGeneric,
	"Generic":               simulator.FaultTypeGeneric,
	"NotAuthenticated":      simulator.FaultTypeNotAuthenticated,
	"NoPermission":          simulator.FaultTypeNoPermission,
	"InvalidArgument":       simulator.FaultTypeInvalidArgument,
	"ManagedObjectNotFound": simulator.FaultTypeManagedObjectNotFound,
	"InvalidState":          simulator.FaultTypeInvalidState,
	"NetworkFailure":        simulator.FaultTypeNetworkFailure,
	"Timeout":               simulator.FaultTypeTimeout,
	"InsufficientResources": simulator.FaultTypeInsufficientResourcesFault,
	"ResourceInUse":         simulator.FaultTypeResourceInUse,
	"MethodNotFound":        simulator.FaultTypeMethodNotFound,
}

var systemErrors = map[string]string{
	"":               "",
	"Generic":        "",
	"NetworkFailure": "Network connection failed: ",
	"Timeout":        "Operation timed out: ",
}

type controls struct {
	svc        *simulator.Service
	mu         sync.Mutex
	soapCalls  map[string]int
	restCalls  map[string]int
	delays     []*delayRule
	restFaults []*restFault
}

func newControls(svc *simulator.Service) *controls {
	return &controls{svc: svc, soapCalls: map[string]int{}, restCalls: map[string]int{}}
}

// soapHook runs for every SOAP call the simulator dispatches (before fault injection).
func (c *controls) soapHook(_ *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
	c.mu.Lock()
	c.soapCalls[m.Name]++
	delay := 0
	for _, d := range c.delays {
		if d.Method != m.Name && d.Method != "*" {
			continue
		}
		if d.Count > 0 && d.used >= d.Count {
			continue
		}
		d.used++
		delay = d.DelayMs
		break
	}
	c.mu.Unlock()
	if delay > 0 {
		time.Sleep(time.Duration(delay) * time.Millisecond)
	}
	return nil, nil
}

func (c *controls) restWrapper(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		if !strings.HasPrefix(path, "/rest/") && !strings.HasPrefix(path, "/api/") {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Method + " " + path
		if action := r.URL.Query().Get("~action"); action != "" {
			key += "?~action=" + action
		}
		c.mu.Lock()
		c.restCalls[key]++
		var hit *restFault
		for _, f := range c.restFaults {
			if strings.HasPrefix(path, f.PathPrefix) && (f.Count == 0 || f.used < f.Count) {
				f.used++
				hit = f
				break
			}
		}
		c.mu.Unlock()
		if hit != nil {
			if hit.DelayMs > 0 {
				time.Sleep(time.Duration(hit.DelayMs) * time.Millisecond)
			}
			if hit.Status != 0 {
				w.WriteHeader(hit.Status)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (c *controls) register(mux *http.ServeMux) {
	mux.HandleFunc("/kccm/calls", c.calls)
	mux.HandleFunc("/kccm/faults", c.faults)
	mux.HandleFunc("/kccm/delays", c.delaysHandler)
	mux.HandleFunc("/kccm/rest-faults", c.restFaultsHandler)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (c *controls) calls(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, map[string]map[string]int{"soap": c.soapCalls, "rest": c.restCalls})
	case http.MethodDelete:
		c.soapCalls = map[string]int{}
		c.restCalls = map[string]int{}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (c *controls) faults(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, c.svc.GetFaultStats())
	case http.MethodDelete:
		c.svc.ClearFaultRules()
		w.WriteHeader(http.StatusNoContent)
	case http.MethodPost:
		var spec faultSpec
		if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		kind, ok := faultTypes[spec.Fault]
		if !ok {
			http.Error(w, fmt.Sprintf("unknown fault %q", spec.Fault), http.StatusBadRequest)
			return
		}
		rule := &simulator.FaultInjectionRule{
			MethodName: orStar(spec.Method), ObjectType: orStar(spec.ObjectType),
			ObjectName: orStar(spec.ObjectName), Probability: 1, FaultType: kind,
			Message: spec.Message, MaxCount: spec.Count, SkipCount: spec.Skip,
			Delay: spec.DelayMs, Enabled: true,
		}
		if spec.Probability > 0 {
			rule.Probability = spec.Probability
		}
		if reason, ok := systemErrors[spec.Fault]; ok {
			// vcsim sends these as "SystemErrorFault", a type name no vCenter sends (and
			// pyvmomi cannot decode): send vmodl.fault.SystemError, as vCenter does.
			message := spec.Message
			if message == "" {
				message = "Fault injected by simulator"
			}
			rule.FaultType = simulator.FaultTypeCustom
			rule.Fault = &types.SystemError{Reason: reason + message}
		}
		c.svc.AddFaultRule(rule)
		w.WriteHeader(http.StatusCreated)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func (c *controls) delaysHandler(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var d delayRule
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.delays = append(c.delays, &d)
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		c.delays = nil
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (c *controls) restFaultsHandler(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var f restFault
		if err := json.NewDecoder(r.Body).Decode(&f); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.restFaults = append(c.restFaults, &f)
		w.WriteHeader(http.StatusCreated)
	case http.MethodDelete:
		c.restFaults = nil
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}
