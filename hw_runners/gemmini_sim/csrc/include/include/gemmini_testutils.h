#include "../gemmini_testutils.h"
