import re,glob,itertools
import numpy as np
SH={'qkv':(6144,4096),'o':(4096,4096),'gate_up':(28672,4096),'down':(4096,14336)}
def parse(path):
    d={}
    for l in open(path):
        m=re.match(r'(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s',l)
        if m and m.group(1)=='w4a16': d[(m.group(3),int(m.group(4)))]=float(m.group(5))
    return d
def eff_sp(tiles,kt,sp):
    tail=tiles%132
    if tail==0 or sp<=1: return 1
    if tail*sp>132 or kt<sp: return 1
    return sp
pts=[]
for f in glob.glob('sw/bm*_sp*.txt'):
    bm,sp=map(int,re.findall(r'bm(\d+)_sp(\d+)',f)[0])
    for (sh,m),t in parse(f).items():
        n,k=SH[sh]; kt=k//64; tiles=-(-m//bm)*-(-n//128); s=eff_sp(tiles,kt,sp)
        pts.append((sh,m,bm,s,tiles,kt,t))
def model(p,F,P,FX,a,c):
    sh,m,bm,s,tiles,kt,t=p
    full=tiles//132; tail=tiles%132
    last = 0 if tail==0 else (kt if s==1 else -(-kt//s)+F+P*s)
    return a + c*(bm+FX)*(full*kt+last)
best=None
for F in np.arange(0,20,1):
  for P in np.arange(0,8,0.5):
    for FX in (64,96,128,160,192):
      X=np.array([[1,(p[2]+FX)*((p[4]//132)*p[5]+(0 if p[4]%132==0 else (p[5] if p[3]==1 else -(-p[5]//p[3])+F+P*p[3])))] for p in pts])
      y=np.array([p[6] for p in pts])
      coef,res,_,_=np.linalg.lstsq(X,y,rcond=None)
      err=np.sqrt(np.mean(((X@coef-y)/y)**2))
      if best is None or err<best[0]: best=(err,F,P,FX,coef)
print(best)

def plan(m,n,k,F,P,FX,SMIN=4,SMAX=8):
    kt=k//64; best=None
    bms=[64] if m<=64 else [128,256]
    for bm in bms:
        tiles=-(-m//bm)*-(-n//128); full=tiles//132; tail=tiles%132
        bs,cost=1,kt
        if tail:
            for sp in range(2,SMAX+1):
                if tail*sp>132 or kt<sp or kt//sp<SMIN: break
                c=-(-kt//sp)+F+P*sp
                if c<cost: bs,cost=sp,c
        else: cost=0
        tot=(bm+FX)*(full*kt+cost)
        if best is None or tot<=best[0]: best=(tot,bm,bs)
    return best[1],best[2]
res={}
for f in glob.glob('sw/bm*_sp*.txt'):
    bm,sp=map(int,re.findall(r'bm(\d+)_sp(\d+)',f)[0]); res[(bm,sp)]=parse(f)
plan_meas=parse('sw/plan.txt')
import sys
for F,P,FX in [(6,0,128),(2,4,160),(5,3.5,128),(2,4,128)]:
    tot=0; totbest=0; worst=[]
    for key in sorted(plan_meas):
        sh,m=key; n,k=SH[sh]
        bm,sp=plan(m,n,k,F,P,FX)
        # measured time of that config: forced (bm,sp) run
        t=res[(bm,sp)][key]
        b=min(r[key] for r in res.values() if key in r)
        tot+=t; totbest+=b; worst.append((round(t/b,3),key,(bm,sp)))
    worst.sort(reverse=True)
    print((F,P,FX), 'sum',round(tot,1),'best',round(totbest,1), worst[:4])
