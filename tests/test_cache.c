#include "common.h"
Test(placeholder_cache, none) {}
