{{/* The webhook's pod template, shared by the Deployment and (persistent data) the StatefulSet. */}}
{{- define "gpupolicy.podTemplate" -}}
metadata:
  labels:
    {{- include "gpupolicy.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # The server reloads its policy when the ConfigMap changes (and keeps the last good one when
    # the new one is invalid); rolling the pods on a chart upgrade applies it at once, and a new
    # pod that cannot load it stops the rollout while the old pods serve.
    checksum/policy: {{ include "gpupolicy.policy" . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "gpupolicy.serviceAccountName" . }}
  # The API token is mounted explicitly below (kube-api-access), only into this container.
  automountServiceAccountToken: false
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  affinity:
    {{- with .Values.affinity.nodeAffinity }}
    nodeAffinity:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- with .Values.affinity.podAffinity }}
    podAffinity:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    podAntiAffinity:
      {{- if eq .Values.podAntiAffinity "hard" }}
      requiredDuringSchedulingIgnoredDuringExecution:
        - topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "gpupolicy.selectorLabels" . | nindent 14 }}
      {{- else }}
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "gpupolicy.selectorLabels" . | nindent 16 }}
      {{- end }}
  {{- if .Values.topologySpreadConstraints.enabled }}
  topologySpreadConstraints:
    {{- range .Values.topologySpreadConstraints.topologyKeys }}
    - maxSkew: {{ $.Values.topologySpreadConstraints.maxSkew }}
      topologyKey: {{ . }}
      whenUnsatisfiable: {{ $.Values.topologySpreadConstraints.whenUnsatisfiable }}
      labelSelector:
        matchLabels:
          {{- include "gpupolicy.selectorLabels" $ | nindent 10 }}
    {{- end }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: 30
  containers:
    - name: webhook
      image: {{ include "gpupolicy.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      # The image's entry point is `gpupolicy serve`; these are its flags.
      args:
        - --port={{ .Values.containerPort }}
        - --tls-cert=/tls/tls.crt
        - --tls-key=/tls/tls.key
        - --tls-check-seconds={{ .Values.tls.checkSeconds }}
        - --policy=/etc/gpupolicy/policy.yaml
        {{- range .Values.extraPolicyFiles }}
        - --policy={{ . }}
        {{- end }}
        - --mode={{ .Values.mode }}
        - --data-dir={{ .Values.dataDir.path }}
        {{- if not .Values.provenance.enabled }}
        - --no-provenance
        {{- else }}
        {{- if ge (float64 .Values.provenance.timeoutSeconds) (float64 .Values.webhook.timeoutSeconds) }}
        {{- fail (printf "provenance.timeoutSeconds (%v) must be below webhook.timeoutSeconds (%v): the API server stops waiting first" .Values.provenance.timeoutSeconds .Values.webhook.timeoutSeconds) }}
        {{- end }}
        - --db-timeout={{ .Values.provenance.timeoutSeconds }}
        - --journal-max-mb={{ .Values.provenance.journalMaxMb }}
        {{- with .Values.provenance.apiPort }}
        {{- if eq (int .) (int $.Values.containerPort) }}
        {{- fail "provenance.apiPort must not be the containerPort: the records are never served on the admission port" }}
        {{- end }}
        - --provenance-api-port={{ . }}
        {{- end }}
        {{- /* The database URL (it holds a password) is read from GPUPOLICY_PROVENANCE_DB below,
               never passed as an argument: arguments are visible to anyone who lists processes. */}}
        {{- end }}
        {{- if .Values.clusterFacts.enabled }}
        - --cluster-facts-seconds={{ .Values.clusterFacts.recomputeSeconds }}
        {{- else }}
        - --no-cluster-facts
        {{- end }}
        - --log-level={{ .Values.logLevel }}
      env:
        - name: TMPDIR
          value: /tmp
        - name: HOME
          value: {{ .Values.dataDir.path }}
        # Also what `kubectl exec ... -- gpupolicy provenance` reads.
        - name: GPUPOLICY_DATA_DIR
          value: {{ .Values.dataDir.path }}
        {{- if include "gpupolicy.dbEnabled" . }}
        - name: GPUPOLICY_PROVENANCE_DB
          valueFrom:
            secretKeyRef:
              name: {{ include "gpupolicy.dbSecretName" . }}
              key: {{ .Values.provenance.db.secretKey }}
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: https
          containerPort: {{ .Values.containerPort }}
          protocol: TCP
      startupProbe:
        httpGet: {path: /healthz, port: https, scheme: HTTPS}
        {{- toYaml .Values.probes.startup | nindent 8 }}
      readinessProbe:
        # 200 only once the policy is loaded and the cluster caches have synced.
        httpGet: {path: /readyz, port: https, scheme: HTTPS}
        {{- toYaml .Values.probes.readiness | nindent 8 }}
      livenessProbe:
        httpGet: {path: /healthz, port: https, scheme: HTTPS}
        {{- toYaml .Values.probes.liveness | nindent 8 }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: tls
          mountPath: /tls
          readOnly: true
        - name: policy
          mountPath: /etc/gpupolicy
          readOnly: true
        - name: {{ include "gpupolicy.volumeClaimName" . }}
          mountPath: {{ .Values.dataDir.path }}
        - name: tmp
          mountPath: /tmp
        - name: kube-api-access
          mountPath: /var/run/secrets/kubernetes.io/serviceaccount
          readOnly: true
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    - name: tls
      secret:
        secretName: {{ include "gpupolicy.tlsSecretName" . }}
    - name: policy
      configMap:
        name: {{ include "gpupolicy.fullname" . }}-policy
    {{- if ne .Values.dataDir.type "persistentVolumeClaim" }}
    - name: {{ include "gpupolicy.volumeClaimName" . }}
      emptyDir:
        {{- with .Values.dataDir.emptyDir.sizeLimit }}
        sizeLimit: {{ . }}
        {{- end }}
    {{- end }}
    - name: tmp
      emptyDir:
        sizeLimit: 256Mi
    # What automountServiceAccountToken would mount: a bound, expiring token, the cluster CA
    # and the namespace (the kubernetes client's in-cluster configuration reads these files).
    - name: kube-api-access
      projected:
        defaultMode: 0444
        sources:
          - serviceAccountToken:
              path: token
              expirationSeconds: {{ .Values.serviceAccount.tokenExpirationSeconds }}
          - configMap:
              name: kube-root-ca.crt
              items:
                - {key: ca.crt, path: ca.crt}
          - downwardAPI:
              items:
                - path: namespace
                  fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
