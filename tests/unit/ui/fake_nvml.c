/* A stand-in for NVML's entry points that the live view calls (libaff/ui/gpu_monitor.cpp),
   answering fixed readings for two GPUs: the second reports no power, as some boards do. */
#include <string.h>

typedef struct { unsigned int gpu, memory; } Utilization;
typedef struct { unsigned long long total, free, used; } Memory;

static int started = 0;
static int devices[2] = {0, 1};

int nvmlInit_v2(void) { started = 1; return 0; }
int nvmlShutdown(void) { started = 0; return 0; }
int nvmlDeviceGetCount_v2(unsigned int* n) { *n = 2; return started ? 0 : 1; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void** d) {
    if (i > 1) return 2;
    *d = &devices[i];
    return 0;
}
static int index_of(void* d) { return (int)((int*)d - devices); }
int nvmlDeviceGetName(void* d, char* name, unsigned int n) {
    strncpy(name, index_of(d) == 0 ? "Fake GPU A" : "Fake GPU B", n);
    return 0;
}
int nvmlDeviceGetUtilizationRates(void* d, Utilization* u) {
    u->gpu = index_of(d) == 0 ? 87 : 3;
    u->memory = 40;
    return 0;
}
int nvmlDeviceGetMemoryInfo(void* d, Memory* m) {
    m->total = 144ull << 30;
    m->used = index_of(d) == 0 ? (100ull << 30) : (1ull << 30);
    m->free = m->total - m->used;
    return 0;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned int* mw) {
    if (index_of(d) == 1) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *mw = 312500;
    return 0;
}
int nvmlDeviceGetClockInfo(void* d, int type, unsigned int* mhz) {
    *mhz = type == 1 ? 1980 : 2619;
    return 0;
}
