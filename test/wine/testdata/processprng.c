/*
 * bcryptprimitives.dll for Wine 8.0, which lacks it: Go's Windows runtime
 * (since Go 1.24) draws its random numbers from ProcessPrng and will not
 * start without it. This stand-in exports ProcessPrng over RtlGenRandom
 * (advapi32's SystemFunction036). Only the Wine test uses it; a real
 * Windows has the DLL.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
		if (!SystemFunction036(data, chunk))
			return FALSE;
		data += chunk;
		length -= chunk;
	}
	return TRUE;
}
