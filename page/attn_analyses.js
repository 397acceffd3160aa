(function(){const A=D.analyses,T=A.T,W=A.window;
const sec=document.createElement('div');sec.id='analyses';document.body.appendChild(sec);
const out=document.createElement('div');out.id='aread';out.style.cssText='font-family:monospace;min-height:1.4em;margin:6px 0;white-space:pre';out.textContent='hover a cell of the views below';sec.appendChild(out);
function esc(c){return shown(c).replace(/&/g,'&amp;').replace(/</g,'&lt;').replace(/"/g,'&quot;');}
function dcol(x){x=Math.max(-1,Math.min(1,x));const t=Math.abs(x),e=x<0?[33,102,172]:[178,24,43];return 'rgb('+e.map(v=>Math.round(255+t*(v-255))).join(',')+')';}
function sign(x,n){return (x>=0?'+':'')+x.toFixed(n);}
function heading(t){const h=document.createElement('h3');h.textContent=t;sec.appendChild(h);return h;}
if(A.ablation||A.lens||A.attribution)heading('Why a head matters, on the text\'s first '+(T+1)+' characters (each position predicting the next)');
if(A.ablation){const b=A.ablation,frozen=b.units[0].meanFrozen!==undefined;let top=1e-9,kind='mean';
 b.units.forEach(u=>{top=Math.max(top,Math.abs(u.zero-b.loss),Math.abs(u.mean-b.loss));if(frozen)top=Math.max(top,Math.abs(u.zeroFrozen-b.loss),Math.abs(u.meanFrozen-b.loss));});
 heading('ablation: the loss increase without each head, or a layer\'s whole attention or MLP ('+b.positions+' predictions in '+b.windows+' window'+(b.windows>1?'s':'')+', loss '+b.loss.toFixed(4)+' unchanged)');
 const k=document.createElement('select');k.id='ablationkind';k.add(new Option('mean-ablated','mean'));k.add(new Option('zero-ablated','zero'));
 if(frozen){k.add(new Option('mean-ablated, later patterns frozen','meanFrozen'));k.add(new Option('zero-ablated, later patterns frozen','zeroFrozen'));}sec.appendChild(k);
 const t=document.createElement('table');t.id='ablation';sec.appendChild(t);
 function fill(){let s='<tr><th>layer</th>';for(let h=0;h<NH;h++)s+='<th>head '+h+'</th>';s+='<th>attn</th><th>mlp</th></tr>';
  for(let l=0;l<L;l++){s+='<tr><td>'+l+'</td>';for(let c=0;c<NH+2;c++){const i=l*(NH+2)+c,u=b.units[i],d=u[kind]-b.loss;
   s+='<td data-unit="'+i+'" data-increase="'+d.toFixed(6)+'" style="background:'+dcol(d/top)+(Math.abs(d/top)>0.6?';color:#fff':'')+'">'+sign(d,3)+'</td>';}s+='</tr>';}
  t.innerHTML=s;}
 k.onchange=()=>{kind=k.value;fill();};fill();
 t.onmouseover=e=>{const c=e.target.closest('td[data-unit]');if(!c)return;const u=b.units[+c.dataset.unit];
  out.textContent='layer '+u.layer+' '+(u.head==='attn'||u.head==='mlp'?u.head:'head '+u.head)+': loss '+b.loss.toFixed(6)+' unchanged, '+u.zero.toFixed(6)+' zero-ablated, '+u.mean.toFixed(6)+' mean-ablated'+(frozen?'; later patterns frozen: '+u.zeroFrozen.toFixed(6)+' zero-ablated, '+u.meanFrozen.toFixed(6)+' mean-ablated':'');};}
let showAttr=null;
if(A.lens){const n=A.lens;heading('logit lens: the most likely next character after the embeddings and each block, on the colour of the true one\'s probability (click a column for its attribution)');
 const t=document.createElement('table');t.id='lens';t.style.fontFamily='monospace';sec.appendChild(t);
 let s='<tr><th>text</th>';for(let i=0;i<T;i++)s+='<th data-pos="'+i+'">'+esc(W[i])+'</th>';s+='</tr>';
 for(let d=0;d<=L;d++){s+='<tr><th>'+(d?'block '+(d-1):'embed')+'</th>';for(let i=0;i<T;i++){const j=d*T+i,p=n.nextProb[j];
  s+='<td data-depth="'+d+'" data-pos="'+i+'" data-next-prob="'+p.toFixed(6)+'" style="text-align:center;background:'+color(p)+';color:'+(p<0.5?'#fff':'#222')+'">'+esc(n.top[j])+'</td>';}s+='</tr>';}
 s+='<tr><th>next</th>';for(let i=0;i<T;i++)s+='<th>'+esc(W[i+1])+'</th>';t.innerHTML=s+'</tr>';
 t.onmouseover=e=>{const c=e.target.closest('td[data-depth]');if(!c)return;const d=+c.dataset.depth,i=+c.dataset.pos,j=d*T+i;
  out.textContent=(d?'after block '+(d-1):'after the embeddings')+', position '+i+' \''+shown(W[i])+'\': most likely next \''+shown(n.top[j])+'\' '+n.topProb[j].toFixed(6)+', true next \''+shown(W[i+1])+'\' '+n.nextProb[j].toFixed(6);};
 t.onclick=e=>{const c=e.target.closest('[data-pos]');if(c&&showAttr)showAttr(+c.dataset.pos);};}
if(A.attribution){const at=A.attribution;heading('attribution: what each part of the final stream adds to logit(true next) - logit(the most likely other)');
 const box=document.createElement('div');box.id='attribution';sec.appendChild(box);
 showAttr=p=>{const a=at[p];let top=1e-9;a.parts.forEach(x=>{top=Math.max(top,Math.abs(x[1]));});
  box.dataset.position=p;box.dataset.logitDiff=a.diff.toFixed(6);box.dataset.total=a.total.toFixed(6);
  let s='<p>position '+p+', reading \''+esc(W[p])+'\': logit(\''+esc(a.next)+'\') - logit(\''+esc(a.other)+'\') = '+a.diff.toFixed(4)+'; the parts add up to '+a.total.toFixed(4)+'</p><table>';
  a.parts.forEach(x=>{const v=x[1],w=Math.round(200*Math.abs(v)/top),bar='<div style="display:inline-block;height:10px;width:'+w+'px;background:'+dcol(v>=0?0.8:-0.8)+'"></div>';
   s+='<tr class="bar" data-part="'+x[0]+'" data-value="'+v.toFixed(6)+'" title="'+x[0]+': '+sign(v,6)+'"><td style="text-align:left">'+x[0]+'</td>'+'<td style="width:200px;text-align:right">'+(v<0?bar:'')+'</td><td style="width:200px;text-align:left">'+(v>=0?bar:'')+'</td><td>'+sign(v,4)+'</td></tr>';});
  box.innerHTML=s+'</table>';};
 box.onmouseover=e=>{const r=e.target.closest('tr[data-part]');if(r)out.textContent=r.dataset.part+': '+sign(+r.dataset.value,6);};
 const f=new URLSearchParams(location.hash.slice(1)),p=f.has('pos')?parseInt(f.get('pos'),10):A.chosen;
 showAttr(p>=0&&p<T?p:A.chosen);}
if(A.patching){const P=A.patching,PT=P.T;let top=1;P.heads.concat(P.stream).forEach(x=>{top=Math.max(top,Math.abs(x));});
 heading('activation patching: how much of the clean run\'s logit(\''+shown(P.answers[0])+'\') - logit(\''+shown(P.answers[1])+'\') at the last position comes back when one activation of the clean run replaces the corrupted run\'s');
 const n=document.createElement('p');n.className='u';n.textContent='LD clean '+P.cleanDiff.toFixed(4)+', corrupted '+P.corruptDiff.toFixed(4)+'; recovery = (LD patched - LD corrupted) / (LD clean - LD corrupted): 0 nothing back (white), 1 all of it (red), below 0 blue';sec.appendChild(n);
 function cellStyle(r){return 'background:'+dcol(r/top)+(Math.abs(r/top)>0.6?';color:#fff':'');}
 const ht=document.createElement('table');ht.id='patch-heads';sec.appendChild(ht);
 let s='<tr><th>layer</th>';for(let h=0;h<NH;h++)s+='<th>head '+h+'</th>';s+='</tr>';
 for(let l=0;l<L;l++){s+='<tr><td>'+l+'</td>';for(let h=0;h<NH;h++){const r=P.heads[l*NH+h];
  s+='<td data-layer="'+l+'" data-head="'+h+'" data-recovery="'+r.toFixed(6)+'" style="'+cellStyle(r)+'">'+r.toFixed(3)+'</td>';}s+='</tr>';}
 ht.innerHTML=s;
 ht.onmouseover=e=>{const c=e.target.closest('td[data-head]');if(!c)return;const i=(+c.dataset.layer)*NH+(+c.dataset.head);
  out.textContent='layer '+c.dataset.layer+' head '+c.dataset.head+' patched: LD '+P.headDiffs[i].toFixed(6)+', recovery '+P.heads[i].toFixed(6);};
 const st=document.createElement('table');st.id='patch-stream';st.style.fontFamily='monospace';sec.appendChild(st);
 s='<tr><th>clean</th>';for(let t=0;t<PT;t++)s+='<th>'+esc(P.clean[t])+'</th>';s+='</tr>';
 for(let l=0;l<L;l++){s+='<tr><th>block '+l+'</th>';for(let t=0;t<PT;t++){const r=P.stream[l*PT+t];
  s+='<td data-layer="'+l+'" data-pos="'+t+'" data-recovery="'+r.toFixed(6)+'" style="min-width:10px;'+cellStyle(r)+'"></td>';}s+='</tr>';}
 s+='<tr><th>corrupt</th>';for(let t=0;t<PT;t++)s+='<th style="color:#b2182b">'+(P.corrupt[t]!==P.clean[t]?esc(P.corrupt[t]):'')+'</th>';st.innerHTML=s+'</tr>';
 st.onmouseover=e=>{const c=e.target.closest('td[data-pos]');if(!c)return;const l=+c.dataset.layer,t=+c.dataset.pos,i=l*PT+t;
  out.textContent='the stream into block '+l+' at position '+t+' \''+shown(P.clean[t])+'\''+(P.corrupt[t]!==P.clean[t]?' (corrupted: \''+shown(P.corrupt[t])+'\')':'')+' patched: LD '+P.streamDiffs[i].toFixed(6)+', recovery '+P.stream[i].toFixed(6);};}
})();
