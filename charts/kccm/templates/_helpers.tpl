{{- define "kccm.labels" -}}
app.kubernetes.io/name: kccm
app.kubernetes.io/component: cloud-controller-manager
{{- end }}

{{- define "kccm.secretName" -}}
{{- .Values.cloudConfig.existingSecret | default (printf "%s-cloud-config" .Values.name) }}
{{- end }}

{{- define "kccm.leaseRole" -}}
system::leader-locking-{{ .Values.name }}
{{- end }}

{{/* The pod template shared by the Deployment and the DaemonSet. */}}
{{- define "kccm.podTemplate" -}}
metadata:
  labels:
    {{- include "kccm.labels" . | nindent 4 }}
spec:
  serviceAccountName: {{ .Values.name }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  hostNetwork: {{ .Values.hostNetwork }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 65532
    runAsGroup: 65532
    fsGroup: 65532
    seccompProfile:
      type: RuntimeDefault
  {{- if eq .Values.mode "deployment" }}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector:
            matchLabels:
              {{- include "kccm.labels" . | nindent 14 }}
          topologyKey: kubernetes.io/hostname
  {{- end }}
  {{- $nodeSelector := .Values.nodeSelector }}
  {{- if and (not $nodeSelector) (eq .Values.mode "daemonset") }}
  {{- $nodeSelector = dict "node-role.kubernetes.io/control-plane" "" }}
  {{- end }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: cloud-controller-manager
      image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - --cloud-provider={{ required "cloudProvider is required" .Values.cloudProvider }}
        - --cloud-config=/etc/kubernetes/cloud-config/cloud.conf
        {{- if .Values.clusterCIDR }}
        - --cluster-cidr={{ .Values.clusterCIDR }}
        {{- end }}
        - --leader-elect={{ .Values.leaderElection.enabled }}
        {{- if ne .Values.leaderElection.resourceName "cloud-controller-manager" }}
        - --leader-elect-resource-name={{ .Values.leaderElection.resourceName }}
        {{- end }}
        {{- if ne .Values.namespace "kube-system" }}
        - --leader-elect-resource-namespace={{ .Values.namespace }}
        {{- end }}
        - --use-service-account-credentials=false
        - --secure-port=10258
        - --bind-address=0.0.0.0
        - --v={{ .Values.verbosity }}
        {{- with .Values.nodeMetadataRefreshPeriod }}
        - --node-metadata-refresh-period={{ . }}
        {{- end }}
        {{- range .Values.extraArgs }}
        - {{ . | quote }}
        {{- end }}
      {{- with .Values.env }}
      env:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        - name: https
          containerPort: 10258
          protocol: TCP
      livenessProbe:
        httpGet:
          path: /healthz
          port: 10258
          scheme: HTTPS
        initialDelaySeconds: 15
        periodSeconds: 10
        timeoutSeconds: 5
        failureThreshold: 3
      readinessProbe:
        httpGet:
          path: /healthz
          port: 10258
          scheme: HTTPS
        periodSeconds: 10
        timeoutSeconds: 5
      {{- with .Values.resources }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        runAsNonRoot: true
        capabilities:
          drop: [ALL]
      volumeMounts:
        - name: cloud-config
          mountPath: /etc/kubernetes/cloud-config
          readOnly: true
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: cloud-config
      secret:
        secretName: {{ include "kccm.secretName" . }}
        defaultMode: 0440
    - name: tmp
      emptyDir: {}
{{- end }}
