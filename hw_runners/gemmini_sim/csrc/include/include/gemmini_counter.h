#include "../gemmini_counter.h"
