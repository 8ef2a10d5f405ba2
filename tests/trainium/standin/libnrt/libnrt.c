/* Stand-in libnrt (the Neuron runtime's C library) for the trainium runner's tests, held to AWS's published
 * headers (src/libnrt/include/nrt/nrt.h, nrt_experimental.h, nrt_status.h in github.com/aws-neuron/aws-neuron-sdk):
 *   - nothing works before nrt_init (NRT_UNINITIALIZED) or after nrt_close (NRT_CLOSED);
 *   - nrt_load's vnc is -1 or one of the cores NEURON_RT_VISIBLE_CORES gives the process, its vnc_count is
 *     "DEPRECATED: always use -1"; a NEFF compiled for another LNC than NEURON_LOGICAL_NC_CONFIG fails to load;
 *   - nrt_get_model_tensor_info reports the NEFF's tensors with nrt_dtype_t's codes (FLOAT32 = 0xA, ...);
 *   - device tensors are allocated on a visible VNC, host tensors with vnc -1; reads and writes stay in bounds;
 *   - nrt_execute takes exactly the NEFF's inputs and outputs, by name and size (NRT_INVALID otherwise).
 * The "device" is standin_device.py, run when the inputs changed since the last execution (a NEFF computes the
 * same outputs from the same inputs); every execution takes at least DEVICE_US of the caller's time. Each
 * execution also records, in ./standin_chip_lock, whether the job's chip lock (job.json's chip_lock) was held. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEVICE_US 20
enum { NRT_SUCCESS = 0, NRT_FAILURE = 1, NRT_INVALID = 2, NRT_RESOURCE = 4, NRT_UNINITIALIZED = 13, NRT_CLOSED = 14 };
enum { PLACEMENT_DEVICE = 0, PLACEMENT_HOST = 1 };
#define NAME_MAX_ 256
#define MAX_TENSORS 32

typedef struct { char name[NAME_MAX_]; int usage; size_t size; int dtype; uint32_t *shape; uint32_t ndim; } nrt_tensor_info_t;
typedef struct { uint64_t tensor_count; nrt_tensor_info_t tensor_array[]; } nrt_tensor_info_array_t;
typedef struct { char name[NAME_MAX_]; size_t size; unsigned char *data; } nrt_tensor_t;
typedef struct { int n; char names[MAX_TENSORS][NAME_MAX_]; nrt_tensor_t *t[MAX_TENSORS]; } tensor_set_t;
typedef struct {
  char neff[512];
  int n;
  nrt_tensor_info_t info[MAX_TENSORS];
  unsigned long ran_at;           /* the write count of the last device run */
  unsigned char *out[MAX_TENSORS];
} nrt_model_t;

static int state;                 /* 0 before nrt_init, 1 running, 2 closed */
static unsigned long writes = 1;

static int ready(void) { return state == 1 ? NRT_SUCCESS : state == 0 ? NRT_UNINITIALIZED : NRT_CLOSED; }

static int visible_cores(void) {  /* how many cores NEURON_RT_VISIBLE_CORES names ("3", "0-7", "0,2") */
  const char *v = getenv("NEURON_RT_VISIBLE_CORES");
  if (!v || !*v) return 0;
  int n = 0;
  for (const char *p = v; *p;) {
    long a = strtol(p, (char **)&p, 10), b = a;
    if (*p == '-') b = strtol(p + 1, (char **)&p, 10);
    n += (int)(b - a + 1);
    if (*p == ',') p++;
    else if (*p) return 0;
  }
  return n;
}

int nrt_init(int framework, const char *fw_version, const char *fal_version) {
  (void)fw_version; (void)fal_version;
  if (framework < 1 || framework > 5) return NRT_INVALID;
  if (state == 2) return NRT_CLOSED;
  state = 1;
  return NRT_SUCCESS;
}

void nrt_close(void) { state = 2; }

static int device(const char *args, char *out, size_t cap) {   /* standin_device.py ARGS; its stdout in out */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s %s %s", DEVICE_PYTHON, DEVICE_SCRIPT, args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t got = out ? fread(out, 1, cap - 1, p) : 0;
  if (out) out[got] = 0;
  return pclose(p);
}

int nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, nrt_model_t **model) {
  if (ready()) return ready();
  if (vnc_count != -1) return NRT_INVALID;                       /* "DEPRECATED: always use -1" */
  if (vnc < -1 || vnc >= visible_cores()) return NRT_INVALID;
  nrt_model_t *m = calloc(1, sizeof *m);
  snprintf(m->neff, sizeof m->neff, "%s/.standin-%d.neff", getcwd(NULL, 0), getpid());
  FILE *f = fopen(m->neff, "wb");
  if (!f || fwrite(neff_bytes, 1, size, f) != size) return NRT_FAILURE;
  fclose(f);
  static char text[65536];
  char args[700];
  snprintf(args, sizeof args, "info %s", m->neff);
  if (device(args, text, sizeof text)) return NRT_INVALID;
  /* one line per tensor after the LNC: "in|out NAME DTYPE NDIM D0 D1 ..." */
  char *line = strtok(text, "\n");
  const char *lnc_env = getenv("NEURON_LOGICAL_NC_CONFIG");
  if (!line || atoi(line + 4) != (lnc_env ? atoi(lnc_env) : 2)) return NRT_FAILURE;   /* "lnc N" */
  while ((line = strtok(NULL, "\n")) && m->n < MAX_TENSORS) {
    nrt_tensor_info_t *t = &m->info[m->n];
    char usage[8];
    int used = 0;
    if (sscanf(line, "%7s %255s %d %u%n", usage, t->name, &t->dtype, &t->ndim, &used) != 4) return NRT_INVALID;
    t->usage = strcmp(usage, "in") ? 1 : 0;
    t->shape = calloc(t->ndim ? t->ndim : 1, sizeof *t->shape);
    size_t elems = 1;
    for (uint32_t d = 0; d < t->ndim; d++) {
      int more = 0;
      sscanf(line + used, "%u%n", &t->shape[d], &more);
      used += more;
      elems *= t->shape[d];
    }
    t->size = elems * (t->dtype == 0xA || t->dtype == 0x8 ? 4 : t->dtype == 0x6 || t->dtype == 0x7 ? 2 : 1);
    m->n++;
  }
  *model = m;
  return NRT_SUCCESS;
}

int nrt_unload(nrt_model_t *m) {
  if (!m) return NRT_INVALID;
  unlink(m->neff);
  return NRT_SUCCESS;
}

int nrt_get_model_tensor_info(nrt_model_t *m, nrt_tensor_info_array_t **info) {
  if (ready()) return ready();
  nrt_tensor_info_array_t *a = malloc(sizeof *a + m->n * sizeof(nrt_tensor_info_t));
  a->tensor_count = (uint64_t)m->n;
  memcpy(a->tensor_array, m->info, m->n * sizeof(nrt_tensor_info_t));
  *info = a;
  return NRT_SUCCESS;
}

int nrt_free_model_tensor_info(nrt_tensor_info_array_t *info) { free(info); return NRT_SUCCESS; }

int nrt_allocate_tensor_set(tensor_set_t **set) {
  if (ready()) return ready();
  *set = calloc(1, sizeof **set);
  return NRT_SUCCESS;
}

void nrt_destroy_tensor_set(tensor_set_t **set) { free(*set); *set = NULL; }

int nrt_tensor_allocate(int placement, int vnc, size_t size, const char *name, nrt_tensor_t **tensor) {
  if (ready()) return ready();
  if (placement == PLACEMENT_DEVICE ? vnc < 0 || vnc >= visible_cores() : placement != PLACEMENT_HOST || vnc != -1)
    return NRT_INVALID;
  nrt_tensor_t *t = calloc(1, sizeof *t);
  if (name) snprintf(t->name, sizeof t->name, "%s", name);
  t->size = size;
  t->data = calloc(size ? size : 1, 1);
  *tensor = t;
  return NRT_SUCCESS;
}

void nrt_tensor_free(nrt_tensor_t **tensor) {
  if (*tensor) free((*tensor)->data);
  free(*tensor);
  *tensor = NULL;
}

int nrt_tensor_write(nrt_tensor_t *t, const void *buf, size_t offset, size_t size) {
  if (ready()) return ready();
  if (offset + size > t->size) return NRT_INVALID;
  memcpy(t->data + offset, buf, size);
  writes++;
  return NRT_SUCCESS;
}

int nrt_tensor_read(const nrt_tensor_t *t, void *buf, size_t offset, size_t size) {
  if (ready()) return ready();
  if (offset + size > t->size) return NRT_INVALID;
  memcpy(buf, t->data + offset, size);
  return NRT_SUCCESS;
}

int nrt_add_tensor_to_tensor_set(tensor_set_t *set, const char *name, nrt_tensor_t *tensor) {
  if (ready()) return ready();
  for (int i = 0; i < set->n; i++)
    if (!strcmp(set->names[i], name)) { set->t[i] = tensor; return NRT_SUCCESS; }
  if (set->n == MAX_TENSORS) return NRT_RESOURCE;
  snprintf(set->names[set->n], NAME_MAX_, "%s", name);
  set->t[set->n++] = tensor;
  return NRT_SUCCESS;
}

static nrt_tensor_t *find(const tensor_set_t *set, const char *name) {
  for (int i = 0; i < set->n; i++)
    if (!strcmp(set->names[i], name)) return set->t[i];
  return NULL;
}

static void record_chip_lock(void) {
  char job[65536] = {0}, path[1024];
  FILE *f = fopen("job.json", "r");
  if (!f) return;
  size_t got = fread(job, 1, sizeof job - 1, f);
  fclose(f);
  job[got] = 0;
  char *at = strstr(job, "\"chip_lock\": \"");
  if (!at || sscanf(at + 14, "%1023[^\"]", path) != 1) return;
  int fd = open(path, O_RDWR), held = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0;
  if (fd >= 0) close(fd);
  FILE *out = fopen("standin_chip_lock", "w");
  if (out) fputs(held ? "held" : "free", out), fclose(out);
}

int nrt_execute(nrt_model_t *m, const tensor_set_t *in, tensor_set_t *out) {
  if (ready()) return ready();
  int inputs = 0, outputs = 0;
  for (int i = 0; i < m->n; i++) {                /* exactly the NEFF's tensors, by name and size */
    nrt_tensor_t *t = find(m->info[i].usage ? out : in, m->info[i].name);
    if (!t || t->size != m->info[i].size) return NRT_INVALID;
    if (m->info[i].usage) outputs++; else inputs++;
  }
  if (inputs != in->n || outputs != out->n) return NRT_INVALID;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  if (m->ran_at != writes) {                       /* new inputs: run the kernel */
    char dir[600], path[1200];
    snprintf(dir, sizeof dir, "%s.d", m->neff);
    mkdir(dir, 0700);
    for (int i = 0; i < m->n; i++) {
      if (m->info[i].usage) continue;
      snprintf(path, sizeof path, "%s/in_%s.bin", dir, m->info[i].name);
      FILE *f = fopen(path, "wb");
      fwrite(find(in, m->info[i].name)->data, 1, m->info[i].size, f);
      fclose(f);
    }
    char args[1300];
    snprintf(args, sizeof args, "run %s %s", m->neff, dir);
    if (device(args, NULL, 0)) return 1004;                       /* NRT_EXEC_COMPLETED_WITH_ERR */
    for (int i = 0; i < m->n; i++) {
      if (!m->info[i].usage) continue;
      snprintf(path, sizeof path, "%s/out_%s.bin", dir, m->info[i].name);
      FILE *f = fopen(path, "rb");
      free(m->out[i]);
      m->out[i] = calloc(m->info[i].size, 1);
      if (!f || fread(m->out[i], 1, m->info[i].size, f) != m->info[i].size) return 1004;
      fclose(f);
    }
    m->ran_at = writes;
  }
  for (int i = 0; i < m->n; i++)
    if (m->info[i].usage) memcpy(find(out, m->info[i].name)->data, m->out[i], m->info[i].size);
  record_chip_lock();
  do clock_gettime(CLOCK_MONOTONIC, &now);
  while ((now.tv_sec - start.tv_sec) * 1000000L + (now.tv_nsec - start.tv_nsec) / 1000 < DEVICE_US);
  return NRT_SUCCESS;
}
