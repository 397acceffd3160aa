'use strict';
const D=JSON.parse(document.getElementById('data').textContent);
const L=D.layers,NH=D.heads,cmap=D.colormap;
function floats(b64){const s=atob(b64),u=new Uint8Array(s.length);for(let i=0;i<s.length;i++)u[i]=s.charCodeAt(i);return new Float32Array(u.buffer);}
D.views.forEach(v=>{v.A=floats(v.attn);});
const S={view:0,layer:-1,head:-1,sel:-1,q:-1,k:-1};
const cv=document.getElementById('canvas'),cx=cv.getContext('2d');
function shown(c){return c===32?'\u2423':c===10?'\u21b5':c===9?'\u21e5':c===160?'\u237d':String.fromCodePoint(c);}
function w(v,l,h,i,j){return v.A[((l*NH+h)*v.T+i)*v.T+j];}
function color(x){const k=Math.max(0,Math.min(255,Math.round(x*255)));return '#'+cmap.substr(6*k,6);}
function geom(){const v=D.views[S.view];if(S.layer<0){const t=Math.max(2,Math.floor(160/v.T));return {over:true,cell:t,tile:t*v.T+12,x0:60,y0:24};}return {over:false,cell:Math.max(4,Math.min(16,Math.floor(720/v.T))),x0:24,y0:24};}
function draw(){const v=D.views[S.view],g=geom();
 if(g.over){cv.width=g.x0+NH*g.tile;cv.height=g.y0+L*g.tile;}else{cv.width=g.x0+v.T*g.cell+4;cv.height=g.y0+v.T*g.cell+4;}
 cx.fillStyle='#fff';cx.fillRect(0,0,cv.width,cv.height);cx.font='12px sans-serif';cx.fillStyle='#222';
 if(g.over){for(let l=0;l<L;l++){cx.fillStyle='#222';cx.fillText('layer '+l,4,g.y0+l*g.tile+g.tile/2);
  for(let h=0;h<NH;h++){if(l===0){cx.fillStyle='#222';cx.fillText('head '+h,g.x0+h*g.tile,16);}tile(v,l,h,g.x0+h*g.tile,g.y0+l*g.tile,g.cell);
   const t=v.scores?D.tags[S.view][l*NH+h]:'';if(t){cx.fillStyle='#fff';cx.fillRect(g.x0+h*g.tile+g.cell*v.T-40,g.y0+l*g.tile,40,14);cx.fillStyle='#222';cx.fillText(t,g.x0+h*g.tile+g.cell*v.T-38,g.y0+l*g.tile+11);}}}return;}
 tile(v,S.layer,S.head,g.x0,g.y0,g.cell);cx.fillStyle='#222';cx.font=Math.max(8,g.cell-2)+'px monospace';
 for(let i=0;i<v.T;i++){cx.fillText(shown(v.chars[i]),g.x0+i*g.cell+1,g.y0-4);cx.fillText(shown(v.chars[i]),4,g.y0+(i+1)*g.cell-2);}
 if(S.sel>=0){cx.strokeStyle='#f40';cx.lineWidth=2;cx.strokeRect(g.x0,g.y0+S.sel*g.cell,v.T*g.cell,g.cell);cx.strokeRect(g.x0+S.sel*g.cell,g.y0,g.cell,v.T*g.cell);}
 if(S.q>=0){cx.strokeStyle='#fff';cx.lineWidth=1;cx.strokeRect(g.x0+S.k*g.cell+.5,g.y0+S.q*g.cell+.5,g.cell-1,g.cell-1);}}
function tile(v,l,h,x0,y0,c){for(let i=0;i<v.T;i++)for(let j=0;j<v.T;j++){cx.fillStyle=j>i?((i+j)%2?'#b0b0b0':'#888'):color(w(v,l,h,i,j));cx.fillRect(x0+j*c,y0+i*c,c,c);}}
function readout(l,h,i,j){const v=D.views[S.view],r=document.getElementById('readout');
 if(j>i){r.textContent='query '+i+' \''+shown(v.chars[i])+'\' cannot see key '+j+' (the future)';r.dataset.weight='';return;}
 const x=w(v,l,h,i,j);r.dataset.layer=l;r.dataset.head=h;r.dataset.q=i;r.dataset.k=j;r.dataset.weight=x.toFixed(6);
 r.textContent='layer '+l+' head '+h+': query \''+shown(v.chars[i])+'\' (position '+i+') -> key \''+shown(v.chars[j])+'\' (position '+j+'): weight '+x.toFixed(6);}
cv.addEventListener('mousemove',e=>{const g=geom(),v=D.views[S.view],r=cv.getBoundingClientRect();
 const x=e.clientX-r.left,y=e.clientY-r.top;let l=S.layer,h=S.head,c=g.cell,x0=g.x0,y0=g.y0;
 if(g.over){h=Math.floor((x-g.x0)/g.tile);l=Math.floor((y-g.y0)/g.tile);if(h<0||l<0||h>=NH||l>=L)return;x0+=h*g.tile;y0+=l*g.tile;}
 const j=Math.floor((x-x0)/c),i=Math.floor((y-y0)/c);if(i<0||j<0||i>=v.T||j>=v.T)return;S.q=i;S.k=j;readout(l,h,i,j);if(!g.over)draw();});
cv.addEventListener('click',e=>{const g=geom();if(!g.over)return;const r=cv.getBoundingClientRect();
 const h=Math.floor((e.clientX-r.left-g.x0)/g.tile),l=Math.floor((e.clientY-r.top-g.y0)/g.tile);if(h>=0&&l>=0&&h<NH&&l<L)select(l,h);});
function select(l,h){S.layer=l;S.head=h;document.getElementById('pick').value=l<0?'o':l+','+h;S.q=-1;draw();table();}
function text(){const v=D.views[S.view],t=document.getElementById('text');t.textContent='';
 v.chars.forEach((c,i)=>{const s=document.createElement('span');s.textContent=shown(c);s.title='position '+i;
  if(i===S.sel)s.className='sel';s.onclick=()=>{S.sel=S.sel===i?-1:i;text();draw();};t.appendChild(s);});}
function table(){const v=D.views[S.view],t=document.getElementById('scores');
 let s='<tr><th>layer</th><th>head</th>'+D.scoreTags.map((n,k)=>'<th title="'+D.scoreNames[k]+'">'+n+'</th>').join('')+'<th>type</th></tr>';
 const u=v.scores?v.scores[0]:null;s+='<tr class="u"><td colspan="2">uniform</td>';
 for(let k=0;k<D.scoreNames.length;k++){const p=u?u[k]:null;s+='<td>'+(p&&p[1]!==null?p[1].toFixed(3):'-')+'</td>';}s+='<td></td></tr>';
 for(let h=0;h<L*NH;h++){const r=v.scores?v.scores[h]:null;s+='<tr data-h="'+h+'"'+(S.layer*NH+S.head===h?' class="cur"':'')+'><td>'+Math.floor(h/NH)+'</td><td>'+h%NH+'</td>';
  for(let k=0;k<D.scoreNames.length;k++){const p=r?r[k]:null;s+='<td>'+(p&&p[0]!==null?p[0].toFixed(3):'-')+'</td>';}
  s+='<td>'+(D.tags[S.view][h]||'')+'</td></tr>';}
 t.innerHTML=s;t.querySelectorAll('tr[data-h]').forEach(r=>r.onclick=()=>{const h=+r.dataset.h;select(Math.floor(h/NH),h%NH);});}
function setView(n){S.view=n;const v=D.views[n];document.getElementById('step').value=order.indexOf(n);
 const sl=document.getElementById('steplabel');sl.textContent=v.label+(v.loss!==null?' (loss '+v.loss.toFixed(3)+')':'')+(v.icl!==null?'; ICL score '+v.icl.toFixed(3)+' (the loss late in the context minus early; 0: no gain)':'')+(v.sink!==null?'; attention-sink rate '+v.sink.toFixed(2):'');sl.title=sl.textContent;
 document.getElementById('viewnote').textContent=v.step<0?'':'a training snapshot: the text shown is the training probe, not your text';
 S.sel=-1;S.q=-1;text();draw();table();}
const pick=document.getElementById('pick');pick.add(new Option('overview','o'));
for(let l=0;l<L;l++)for(let h=0;h<NH;h++)pick.add(new Option('layer '+l+' head '+h,l+','+h));
pick.onchange=()=>{if(pick.value==='o')select(-1,-1);else{const p=pick.value.split(',');select(+p[0],+p[1]);}};
// the slider in time order: the snapshots by step, then your text (the trained model's view)
const order=D.views.map((v,i)=>i).slice(1).concat([0]);
const st=document.getElementById('step');st.max=D.views.length-1;st.oninput=()=>setView(order[+st.value]);
(function(){const b=document.getElementById('scalebar').getContext('2d');for(let k=0;k<256;k++){b.fillStyle=color(k/255);b.fillRect(k,0,1,12);}})();
if(D.views.length<2)document.getElementById('stepbox').style.display='none';
function fragment(){const f=new URLSearchParams(location.hash.slice(1));const n=x=>f.has(x)?parseInt(f.get(x),10):null;
 const v=n('view');setView(v!==null&&v>=0&&v<D.views.length?v:0);
 const l=n('layer'),h=n('head');if(l!==null&&h!==null&&l>=0&&l<L&&h>=0&&h<NH)select(l,h);else select(-1,-1);
 const q=n('q'),k=n('k'),V=D.views[S.view];if(q!==null&&k!==null&&S.layer>=0&&q>=0&&k>=0&&q<V.T&&k<V.T){S.q=q;S.k=k;readout(S.layer,S.head,q,k);draw();}}
window.addEventListener('hashchange',fragment);fragment();
