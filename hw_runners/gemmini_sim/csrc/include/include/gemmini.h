#include "../gemmini.h"
